"""A tampering proxy in front of the emulator, for the suites that check what sync does with a
bad upstream answer: it forwards every request, may rewrite an answer's body or cut it off
half-way, and records what it saw; `is_page` and `short_page` pick and shorten listing pages.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from sync.emulator import Emulator


class Proxy:
    """Forwards every request to the emulator; `tamper` may rewrite an answer's body and `cut`
    may drop the connection half-way through one (a body cut off mid-read)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.base_url = ""
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.tamper: Callable[[str, dict[str, str], bytes], bytes | None] = lambda p, q, b: None
        self.cut: Callable[[str, dict[str, str]], bool] = lambda p, q: False
        self.http: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.seen.append((request.path, query))
        assert self.http is not None
        async with self.http.request(
            request.method,
            URL(self.upstream + request.raw_path, encoded=True),
            data=await request.read(),
            headers={k: v for k, v in request.headers.items() if k in ("Content-Type", "Accept")},
        ) as r:
            data, status = await r.read(), r.status
            headers = {k: r.headers[k] for k in ("Content-Type", "Date") if k in r.headers}
        if self.cut(request.path, query):
            resp = web.StreamResponse(status=status, headers=headers)
            resp.content_length = len(data)
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return resp
        changed = self.tamper(request.path, query, data)
        return web.Response(
            status=status, body=data if changed is None else changed, headers=headers
        )


@contextlib.asynccontextmanager
async def proxy_for(emu: Emulator) -> AsyncIterator[Proxy]:
    proxy = Proxy(emu.base_url)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    proxy.base_url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as proxy.http:
            yield proxy
    finally:
        await runner.cleanup()


def is_page(path: str, query: dict[str, str], type_path: str, number: str, *, sparse: bool) -> bool:
    """A plain listing request (no filter[id]) for page `number` of `type_path`."""
    return (
        path == type_path
        and query.get("page[number]") == number
        and "filter[id]" not in query
        and any(k.startswith("fields[") for k in query) == sparse
    )


def short_page(keep: int) -> Callable[[bytes], bytes]:
    """Rewrite a page to its first `keep` rows, `links` untouched (so `links.last` still says
    there are more pages)."""

    def rewrite(data: bytes) -> bytes:
        doc = orjson.loads(data)
        doc["data"] = doc["data"][:keep]
        return orjson.dumps(doc)

    return rewrite
