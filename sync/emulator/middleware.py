"""What every request passes through before its handler: counted, faulted, given the spec's headers.

Each request to a spec route is counted (`Traffic`, per route pattern), lets the data set catch up
with switches assigned since the last one, and meets the switchable faults (`Faults`: latency,
stalls, dropped connections, 429 with `Retry-After`, 5xx), which spare `/accounts` unless
`Hard.account_faults`. Every answer gets the headers of the spec's Versioning section (none
with `Hard.no_version_headers`) and a 404 or 405 as a JSON:API error; with
`Hard.no_relationship_links` its resources lose their `links` (`without_links`). The emulator's own `/_emulator/` routes pass untouched.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from email.utils import formatdate

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware

from sync.emulator.app import EmulatorApp
from sync.emulator.responses import API_VERSION, error
from sync.emulator.spec import BY_PATH
from sync.emulator.traffic import NO_ROUTE

OWN_PREFIX = "/_emulator/"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route_of(request: web.Request) -> str:
    """The route pattern `request` matched, ids replaced: `/malls/{id}/stores`."""
    info = request.match_info
    collection = info.get("collection")
    if collection is not None:
        if collection not in BY_PATH:
            return NO_ROUTE
        pattern = f"/{collection}"
        if "id" in info:
            pattern += "/{id}"
        if "rel" in info:
            pattern += f"/{info['rel']}"
        return pattern
    resource = getattr(info.route, "resource", None)
    return resource.canonical if resource is not None else NO_ROUTE


def gate(emu: EmulatorApp) -> Middleware:
    """The middleware of `emu`: counts, faults and headers (see the module docstring)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        t0 = time.perf_counter()
        if request.path.startswith(OWN_PREFIX):  # the emulator's own routes: no faults, uncounted
            return await handler(request)
        emu.requests += 1
        emu.traffic.count(route_of(request), time.time())
        emu.data.sync_hard()  # switches assigned since the last request take effect
        emu.data.settle()  # late commits whose time has come become visible
        f = emu.faults
        if emu.hard.account_faults or not request.path.startswith("/accounts"):
            if f.latency > 0:
                await asyncio.sleep(f.latency)
            if f.roll(f.stall_rate, "stalled"):
                await asyncio.sleep(f.stall_seconds)
            if f.roll(f.drop_rate, "dropped"):
                if request.transport is not None:
                    request.transport.close()
                raise web.HTTPInternalServerError()
            if f.roll(f.rate_429, "http_429"):
                resp: web.StreamResponse = error(429, "Too Many Requests", "rate limit exceeded")
                resp.headers["Retry-After"] = str(f.retry_after)
                return headers(emu, resp, t0)
            if f.roll(f.error_rate, "http_5xx"):
                status = f.rng.choice(f.error_statuses)
                return headers(emu, error(status, "Server Error", "injected fault"), t0)
        try:
            resp = await handler(request)
        except web.HTTPNotFound:
            resp = error(404, "Not Found", f"no route {request.path}")
        except web.HTTPMethodNotAllowed:
            resp = error(
                405, "Method Not Allowed", f"{request.method} is not allowed on {request.path}"
            )
        return headers(emu, resp, t0)

    return middleware


def headers(emu: EmulatorApp, resp: web.StreamResponse, t0: float) -> web.StreamResponse:
    h = resp.headers
    if emu.hard.no_version_headers:
        h.pop("ETag", None)
    else:
        h["X-API-Version"] = API_VERSION
    if emu.hard.no_relationship_links and isinstance(resp, web.Response):
        without_links(resp)
    h["Cache-Control"] = "max-age=0, private, must-revalidate"
    h["X-Request-Id"] = uuid.uuid4().hex
    h["X-Runtime"] = f"{time.perf_counter() - t0:.6f}"
    h["Vary"] = "Origin"
    h["Date"] = formatdate(emu.now(), usegmt=True)
    return resp


def without_links(resp: web.Response) -> None:
    """`Hard.no_relationship_links`: the body's resources without `links.self`, their
    relationships without `links` (one left without linkage is dropped)."""
    body = resp.body
    if resp.status != 200 or not isinstance(body, bytes) or not body.startswith(b'{"data"'):
        return
    doc = orjson.loads(body)
    data = doc.get("data")
    items = data if isinstance(data, list) else [data] if isinstance(data, dict) else []
    for res in [*items, *(doc.get("included") or [])]:
        res.pop("links", None)
        rels = res.get("relationships") or {}
        for name in list(rels):
            rels[name].pop("links", None)
            if not rels[name]:
                del rels[name]
        if "relationships" in res and not rels:
            del res["relationships"]
    resp.body = orjson.dumps(doc)
