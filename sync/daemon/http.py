"""The daemon's HTTP face: the aiohttp app with the webhook route, `GET /healthz` and `GET /metrics`.

Thin handlers (like stripe-sync-engine's webhook route): each turns a request into one library
call and its result into a response. Verifying and queueing a delivery is the receiver's
(`sync.ingest.receiver`), the health report is `sync.daemon.health`'s, the exposition is
`sync.core.metrics`'. Any other path is a logged and counted 404, like a wrong secret.

A standby (`sync.daemon.standby`: another daemon writes the mirror) serves `make_standby_app`
instead: `/healthz` 200 `standby`, `/metrics`, and 503 with `Retry-After` for every delivery. It
takes no notice because it may not write the mirror (its queue included: never two writers);
the upstream retries the delivery, which reaches the active daemon where both hosts share the
callback URL, and the active daemon's polls catch up on any notice given up on.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from sync.core.errors import ConfigError
from sync.core.metrics import Metrics
from sync.ingest.receiver import CHUNK, Answer, Delivery, Receiver

#: Seconds the body a rejection left unread is still read (and dropped) before the connection
#: closes: a sender still writing would otherwise be reset before it reads the answer, and
#: aiohttp's default (10 s) would read a 50 MB body to its end.
LINGER = 1.0


def respond(answer: Answer) -> web.Response:
    """The receiver's `answer` as an aiohttp response (an error body as JSON, or none)."""
    body = answer.body()
    if body is None:
        response = web.Response(status=answer.status)
    else:
        response = web.Response(status=answer.status, body=body, content_type="application/json")
    if answer.close:
        response.force_close()
    return response


def metrics_handler(metrics: Metrics | None) -> Callable[[web.Request], Awaitable[web.Response]]:
    """`GET /metrics`: the exposition, or 404 when metrics are off."""

    async def metrics_view(request: web.Request) -> web.Response:
        if metrics is None:
            return respond(Answer(404, "metrics are not enabled"))
        body, content_type = metrics.render()
        response = web.Response(body=body)
        response.headers["Content-Type"] = content_type
        return response

    return metrics_view


def make_app(
    receiver: Receiver,
    *,
    health: Callable[[], dict[str, Any]] | None = None,
    metrics: Metrics | None = None,
) -> web.Application:
    """The app the daemon serves on `[webhooks] listen`; see the module docstring."""

    async def webhook(request: web.Request) -> web.StreamResponse:
        delivery = Delivery(
            secret=request.match_info.get("secret", ""),
            method=request.method,
            content_type=request.content_type,
            content_length=request.content_length,
            body=request.content.iter_chunked(CHUNK),
            path=request.path,
            peer=request.remote,
        )
        return respond(await receiver.accept(delivery))

    async def healthz(request: web.Request) -> web.StreamResponse:
        data = health() if health is not None else {"status": "ok"}
        return web.Response(
            status=health_status(data), body=orjson.dumps(data), content_type="application/json"
        )

    async def not_found(request: web.Request) -> web.StreamResponse:
        return respond(receiver.reject(404, "unknown path", request.path, request.remote))

    # One byte over the limit, so the receiver (not aiohttp) names a body that is too large.
    app = web.Application(client_max_size=receiver.limit + 1)
    app.router.add_route("*", "/webhooks/{secret}", webhook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler(metrics))
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app


#: Seconds a standby asks a sender to wait before it delivers again.
STANDBY_RETRY_AFTER = 10
STANDBY_REFUSAL = "standby: another daemon writes this mirror, and this one takes no notices"


def health_status(data: dict[str, Any]) -> int:
    """The HTTP status of a health report: 200 while `ok`, and for a waiting `standby` (a
    load balancer or monitor must not count it down); 503 otherwise."""
    return 200 if data.get("status") in ("ok", "standby") else 503


def make_standby_app(
    health: Callable[[], dict[str, Any]], *, metrics: Metrics | None = None
) -> web.Application:
    """What a standby serves on `[webhooks] listen`; see the module docstring."""

    async def webhook(request: web.Request) -> web.StreamResponse:
        # The path holds the secret: neither logged nor checked (nothing is accepted).
        response = respond(Answer(503, STANDBY_REFUSAL, close=True))
        response.headers["Retry-After"] = str(STANDBY_RETRY_AFTER)
        return response

    async def healthz(request: web.Request) -> web.StreamResponse:
        data = health()
        return web.Response(
            status=health_status(data), body=orjson.dumps(data), content_type="application/json"
        )

    app = web.Application()
    app.router.add_route("*", "/webhooks/{secret}", webhook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler(metrics))
    return app


#: Why an address cannot be bound, in words (errno: what to say).
_BIND_ERRORS = {
    errno.EADDRINUSE: "the port is taken by another program",
    errno.EADDRNOTAVAIL: "the address is not one of this host's",
    errno.EACCES: "binding a port under 1024 needs a privilege this user lacks",
}


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving `app` on `host:port` (0: any free port); the runner and the bound port.

    An address it cannot bind (a port another program holds, an address not on this host, a
    port under 1024 without the right) is `[webhooks] listen`'s problem: a `ConfigError`
    naming it and the address, exit 2 and one line, not a traceback."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, lingering_time=LINGER)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        why = _BIND_ERRORS.get(exc.errno or 0, exc.strerror or str(exc))
        raise ConfigError(
            f"[webhooks] listen = {host}:{port} cannot be served: {why}",
            hint="stop the program listening there, or set [webhooks] listen to a free port",
        ) from None
    sockets = getattr(site._server, "sockets", None) or []
    return runner, sockets[0].getsockname()[1] if sockets else port
