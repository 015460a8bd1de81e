"""A transport that answers with a function: the client's seam faked, as httpx's `MockTransport`.

`FakeTransport(handler)` is what `ChannelClient(settings, transport=...)` and `ChannelSession`
accept in place of the retrying `sync.channel.transport.Transport` (the `Sender` protocol of
`sync.channel.protocols`): each request is one call of `handler(request)` with the request as
the session sent it (`Sent`: the signature already in its parameters), recorded in `sent`. No
HTTP server, no aiohttp: the session's own layers (login, re-login, status -> exception) and the
client's (pages, paging) run for real over it. A handler answers with `answer(status, doc)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sync.channel.budget import RequestBudget
from sync.channel.signing import sign
from sync.channel.transport import Response, Stats


@dataclass(frozen=True)
class Sent:
    """One request as the session handed it to the transport."""

    method: str
    url: str
    params: Mapping[str, str]
    headers: Mapping[str, str]
    json: Any = None

    @property
    def path(self) -> str:
        """The URL's path (what `handler`s route on)."""
        return "/" + self.url.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]


Handler = Callable[[Sent], Response]


def answer(
    status: int, doc: Any = None, *, headers: Mapping[str, str] | None = None, url: str = ""
) -> Response:
    """A JSON:API answer with `doc` as its body (`b""` for None)."""
    body = b"" if doc is None else orjson.dumps(doc)
    return Response(
        status, {"Content-Type": "application/vnd.api+json", **(headers or {})}, body, url
    )


class FakeTransport:
    """Answers each request with `handler`; one attempt each (no retries: a retryable answer
    is returned as it is, the retry policy is `Transport`'s, tested apart)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sent: list[Sent] = []
        self.stats = Stats()
        self.unreachable_reason: str | None = None
        self.closed = False

    async def send(
        self,
        method: str,
        url: str,
        *,
        params: Callable[[], Mapping[str, str]] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        once: bool = False,
        budget: RequestBudget | None = None,
        attempts: int | None = None,
        observe: Callable[[Response], None] | None = None,
    ) -> Response:
        sent = Sent(method, url, dict(params()) if params else {}, dict(headers or {}), json)
        self.sent.append(sent)
        response = self.handler(sent)
        if not response.url:
            response = Response(response.status, response.headers, response.body, url)
        self.stats.statuses[response.status] += 1
        if observe is not None:
            observe(response)
        return response

    async def aclose(self) -> None:
        self.closed = True

    def paths(self, method: str = "GET") -> list[str]:
        """The paths asked with `method`, in order."""
        return [s.path for s in self.sent if s.method == method]


class Upstream:
    """A handler that logs in and checks signatures as the spec describes: login issues
    `token-<n>`, and a data request is answered by `routes[path]` only when signed with the
    newest token (else 401); `logout()` ends the session as a logout elsewhere does. Every
    answer carries `headers` (`X-API-Version`, and `Date` when set)."""

    def __init__(self, routes: Mapping[str, Handler] | None = None) -> None:
        self.routes: dict[str, Handler] = dict(routes or {})
        self.token: str | None = None
        self.logins = 0
        self.headers: dict[str, str] = {"X-API-Version": "v12.3.0"}

    def logout(self) -> None:
        self.token = None

    def signed(self, sent: Sent) -> bool:
        """Whether `sent` carries the newest token's signature."""
        ts = sent.params.get("auth_timestamp", "")
        return (
            self.token is not None
            and ts.isdigit()
            and sent.params.get("auth_token") == sign(self.token, int(ts))
        )

    def __call__(self, sent: Sent) -> Response:
        if sent.path == "/accounts/login":
            self.logins += 1
            self.token = f"token-{self.logins}"
            doc = {"data": {"type": "accounts", "attributes": {"authentication_token": self.token}}}
            return answer(201, doc, headers=self.headers)
        if not self.signed(sent):
            return answer(401, {"errors": [{"detail": "invalid signature"}]}, headers=self.headers)
        route = self.routes.get(sent.path)
        if route is None:
            return answer(404, {"errors": [{"detail": "no such route"}]}, headers=self.headers)
        got = route(sent)
        return Response(got.status, {**self.headers, **got.headers}, got.body, got.url)
