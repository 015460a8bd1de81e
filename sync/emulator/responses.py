"""What every response of the emulator carries: media types, error objects, ETags, `meta.scripts`.

Errors are JSON:API error objects; a helper deep in a handler raises `Reply` with a finished error
response and the `replies` middleware answers with it. Bodies of listings and single resources
carry a weak ETag of their own bytes, so `If-None-Match` gets a 304 only for the very same body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

API_VERSION = "v12.4.1"
JSONAPI = "application/vnd.api+json; charset=utf-8"
JSON = "application/json; charset=utf-8"
JSONAPI_TYPE = "application/vnd.api+json"
#: Every response's `meta.scripts` unless `EmulatorApp.changing_scripts` gives each type its own.
SCRIPTS = [
    {"type": "text/javascript", "content": "window.contentTracking = {channel: 'emulator'};"},
    {"type": "application/ld+json", "content": '{"@context": "https://schema.org"}'},
]


def own_scripts(type_name: str) -> list[dict[str, str]]:
    """What `changing_scripts` serves for a type: the shared tracking script plus two of its
    own, in an order of its own (a type whose name has an odd length lists them backwards)."""
    own = [
        SCRIPTS[0],
        {"type": "text/javascript", "content": f"window.contentType = '{type_name}';"},
        {
            "type": "application/ld+json",
            "content": orjson.dumps(
                {"@context": "https://schema.org", "@type": type_name}
            ).decode(),
        },
    ]
    return own[::-1] if len(type_name) % 2 else own


def error(status: int, title: str, detail: str, parameter: str | None = None) -> web.Response:
    err: dict[str, Any] = {"status": str(status), "title": title, "detail": detail}
    if parameter:
        err["source"] = {"parameter": parameter}
    return web.Response(
        status=status,
        body=orjson.dumps({"errors": [err]}),
        content_type="application/vnd.api+json",
        charset="utf-8",
    )


def json_response(body: Any, status: int = 200) -> web.Response:
    """A plain JSON answer (the emulator's own routes, hours, accounts)."""
    return web.Response(status=status, body=orjson.dumps(body), headers={"Content-Type": JSON})


def etagged(request: web.Request, body: bytes, content_type: str = JSONAPI) -> web.Response:
    # A hash of the body itself: a listing whose included resources changed (an image
    # edited, its owner untouched) gets a new ETag too, so a 304 is never a stale answer.
    tag = f'W/"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
    if request.headers.get("If-None-Match") == tag:
        return web.Response(status=304, headers={"ETag": tag})
    return web.Response(body=body, headers={"ETag": tag, "Content-Type": content_type})


class Reply(Exception):
    """Carries a finished error response out of a helper."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


@web.middleware
async def replies(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except Reply as reply:
        return reply.response
