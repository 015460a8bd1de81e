"""The webhook receiver: the aiohttp endpoint the upstream posts change notices to.

`POST /webhooks/<secret>` only: the secret path segment is the callback's only guard (the upstream
does not sign notices), compared in constant time and never logged. A valid body is committed to
the durable queue and answered 202 at once, before any fetching, so the upstream never
unsubscribes us for being slow. Everything else is rejected with the status that names the
problem (404 path, 405 method, 408 body too slow, 413 too large, 415 content type, 400
off-spec), and logged. While the mirror cannot take writes (disk full, read-only, locked too
long: `sync.store.watch`), or when the queue write itself fails so, a delivery is answered 503 with
the reason: it was not committed, so the upstream must retry it rather than count it done.
The same app serves `GET /healthz` and `GET /metrics`.
"""

from __future__ import annotations

import asyncio
import hmac
import sqlite3
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from sync.core.config import WebhookSettings
from sync.core.errors import StorageFault
from sync.core.logs import get_logger
from sync.core.metrics import Metrics
from sync.model.notices import NoticeError, parse_batch
from sync.store.faults import storage_fault
from sync.store.queue import ChangeQueue
from sync.store.watch import StorageWatch

CONTENT_TYPES = frozenset({"application/json", "application/vnd.api+json"})
MASKED_PATH = "/webhooks/***"


def _reply(status: int, reason: str, extra: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps({"error": reason, **(extra or {})}),
        content_type="application/json",
    )


def make_receiver_app(
    settings: WebhookSettings,
    queue: ChangeQueue,
    *,
    on_enqueued: Callable[[], None] | None = None,
    metrics: Metrics | None = None,
    health: Callable[[], dict[str, Any]] | None = None,
    storage: StorageWatch | None = None,
) -> web.Application:
    """The receiver application; see the module docstring."""
    log = get_logger("sync.webhooks")
    secret = settings.secret.get_secret_value().encode() if settings.secret else None
    limit = settings.max_body_bytes

    def reject(
        status: int, reason: str, request: web.Request, extra: dict[str, str] | None = None
    ) -> web.Response:
        path = MASKED_PATH if request.path.startswith("/webhooks/") else request.path
        log.warning(
            "webhook.rejected", status=status, reason=reason, path=path, peer=request.remote
        )
        if metrics is not None:
            metrics.notices.labels(outcome=f"rejected_{status}").inc()
        return _reply(status, reason, extra)

    def unwritable(fault: StorageFault, request: web.Request) -> web.Response:
        reason = f"the mirror cannot take writes now: {fault}"
        return reject(503, reason, request, {"reason": fault.reason})

    async def receive(request: web.Request) -> web.StreamResponse:
        given = request.match_info.get("secret", "").encode()
        if secret is None or not hmac.compare_digest(given, secret):
            return reject(404, "unknown path", request)
        if request.method != "POST":
            return reject(405, "only POST is accepted", request)
        if request.content_type not in CONTENT_TYPES:
            return reject(
                415,
                f"content type must be application/json, not {request.content_type or 'none'}",
                request,
            )
        if request.content_length is not None and request.content_length > limit:
            return reject(413, f"body over {limit} bytes", request)
        body = bytearray()
        try:
            # A total deadline, not an idle one: a sender dribbling a byte at a time must not
            # hold a handler (and its connection) for ever.
            async with asyncio.timeout(settings.body_timeout):
                async for chunk in request.content.iter_chunked(65536):
                    body += chunk
                    if len(body) > limit:
                        return reject(413, f"body over {limit} bytes", request)
        except TimeoutError:
            response = reject(408, f"body not received within {settings.body_timeout:g} s", request)
            response.force_close()
            return response
        try:
            notices, problems = parse_batch(bytes(body))
        except NoticeError as exc:
            return reject(400, str(exc), request)
        for problem in problems:  # the valid items are kept; each invalid one is reported
            log.warning("webhook.item_invalid", problem=problem)
        if metrics is not None and problems:
            metrics.notice_items_invalid.inc(len(problems))
        if storage is not None and storage.fault is not None:
            return unwritable(storage.fault, request)  # not committed: the upstream retries
        try:
            queued = queue.enqueue(notices)
        except (sqlite3.Error, OSError) as exc:
            fault = (
                storage.report(exc)
                if storage is not None
                else storage_fault(exc, "the mirror", then="then the upstream's retry lands")
            )
            if fault is None:
                raise
            return unwritable(fault, request)
        if on_enqueued is not None and queued:
            on_enqueued()
        if metrics is not None:
            metrics.notices.labels(outcome="accepted").inc()
        log.info(
            "webhook.accepted",
            items=len(notices),
            updates=sum(n.kind == "update" for n in notices),
            deletions=sum(n.kind == "deletion" for n in notices),
            ignored_unknown_types=len(notices) - queued,
            invalid_items=len(problems),
            queue_depth=queue.depth(),
        )
        return web.Response(status=202)

    async def healthz(request: web.Request) -> web.StreamResponse:
        data = health() if health is not None else {"status": "ok"}
        status = 200 if data.get("status") == "ok" else 503
        return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")

    async def metrics_view(request: web.Request) -> web.StreamResponse:
        if metrics is None:
            return _reply(404, "metrics are not enabled")
        body, content_type = metrics.render()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        return resp

    async def not_found(request: web.Request) -> web.StreamResponse:
        return reject(404, "unknown path", request)

    app = web.Application(client_max_size=limit + 1)
    app.router.add_route("*", "/webhooks/{secret}", receive)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_view)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
