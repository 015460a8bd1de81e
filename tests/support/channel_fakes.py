"""The upstream faked at the HTTP seam (aioresponses) for the client suites: canned documents,
a fake upstream that checks signatures as the spec describes, fake sleeps, and a client built
for them. The happy paths run against the emulator elsewhere."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import orjson
from aioresponses import CallbackResult, aioresponses
from yarl import URL

from sync.channel.client import ChannelClient
from sync.channel.protocols import MetaStore, Sender
from sync.core.config import parse_config

BASE = "http://upstream.test"
LOGIN = f"{BASE}/accounts/login"
EMAIL = "me@example.com"
PASSWORD = "pw-Sup3r-secret"
#: The fake upstream's clock, and the one tests give the client.
NOW = 1_700_000_000.0
DEALS_URL = re.compile(r"^http://upstream\.test/deals\?.*$")
ANY_URL = re.compile(r"^http://upstream\.test/.*$")


class FakeSleep:
    """Records the client's waits instead of waiting: every retry test is instant."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def channel_client(
    sleep: FakeSleep | None = None,
    clock: Callable[[], float] | None = None,
    *,
    fail_fast: bool = True,
    store: MetaStore | None = None,
    transport: Sender | None = None,
    **upstream: Any,
) -> ChannelClient:
    """A client of `BASE` with fake sleeps; `upstream` adds or overrides `[upstream]` keys;
    `store` keeps what it learns (`ChannelClient.keep`); `transport` sends its requests
    (`tests/support/transport.py`; None: the real one, over aiohttp)."""
    settings = parse_config(
        {
            "upstream": {
                "base_url": BASE,
                "email": EMAIL,
                "password": PASSWORD,
                # The request budget keeps real time, which a FakeSleep does not advance
                # (tests/e2e/test_budget.py runs it on a fake clock; the e2e suites as shipped).
                "max_requests_per_second": 0,
                **upstream,
            }
        }
    )
    return ChannelClient(
        settings.upstream,
        sleep=sleep or FakeSleep(),
        clock=clock or time.time,
        fail_fast=fail_fast,
        store=store,
        transport=transport,
    )


#: The client suites' client: retries wait a second at most, so the waits they count stay small.
make_client = functools.partial(channel_client, max_backoff=1.0)


def token_doc(token: str = "tok-abc") -> dict[str, Any]:
    """The login's answer."""
    return {"data": {"id": "1", "type": "accounts", "attributes": {"authentication_token": token}}}


def page_doc(n: int = 2, last: int = 1) -> dict[str, Any]:
    """A page of `n` deals whose `links.last` says `last`."""
    return {
        "data": [
            {"id": str(i), "type": "deals", "attributes": {"title": "x"}} for i in range(1, n + 1)
        ],
        "links": {"last": f"{BASE}/deals?page%5Bnumber%5D={last}&page%5Bsize%5D=100"},
        "meta": {"scripts": []},
    }


def collection(
    ids: list[int], *, last: int = 1, rtype: str = "deals", included: int = 0
) -> dict[str, Any]:
    """A page of `rtype` with `ids`, `included` images and both `links`."""
    return {
        "data": [{"id": str(i), "type": rtype, "attributes": {}} for i in ids],
        "included": [{"id": str(i), "type": "images"} for i in range(included)],
        "links": {
            "first": f"{BASE}/{rtype}?page%5Bnumber%5D=1&page%5Bsize%5D=100",
            "last": f"{BASE}/{rtype}?page%5Bnumber%5D={last}&page%5Bsize%5D=100",
        },
        "meta": {"scripts": [{"type": "text/javascript", "content": "x"}]},
    }


class FakeUpstream:
    """Login issues a new token each time; data routes accept only the newest one, signed with
    a timestamp within 5 s of `server_time`. `logout()` invalidates the token (as a logout
    elsewhere does)."""

    def __init__(self, server_time: float = NOW) -> None:
        self.server_time = server_time
        self.token: str | None = None
        self.logins = 0
        self.requests: list[URL] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0
        self.reject_all = False  # every signature fails (e.g. the account lost its rights)
        self.clock_jump_at_login = 0.0  # the clock moves just after a login answered

    def logout(self) -> None:
        self.token = None

    def headers(self) -> dict[str, str]:
        return {"Date": formatdate(self.server_time, usegmt=True), "X-API-Version": "v12.3.0"}

    def login(self, url: URL, **kwargs: Any) -> CallbackResult:
        self.logins += 1
        self.token = f"token-{self.logins}"
        doc = {"data": {"type": "accounts", "attributes": {"authentication_token": self.token}}}
        headers = self.headers()
        self.server_time += self.clock_jump_at_login
        return CallbackResult(status=201, body=orjson.dumps(doc), headers=headers)

    async def data(self, url: URL, **kwargs: Any) -> CallbackResult:
        self.requests.append(url)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        q = url.query
        ts = q.get("auth_timestamp", "")
        ok = (
            not self.reject_all
            and self.token is not None
            and len(ts) == 10
            and abs(int(ts) - self.server_time) <= 5
            and q.get("auth_token") == hashlib.md5(f"{ts}:{self.token}".encode()).hexdigest()
            and q.get("auth_id") == EMAIL
        )
        if not ok:
            err = {"errors": [{"status": "401", "detail": "invalid signature"}]}
            return CallbackResult(status=401, body=orjson.dumps(err), headers=self.headers())
        body = orjson.dumps(collection([1, 2]))
        return CallbackResult(status=200, body=body, headers=self.headers())

    def install(self, m: aioresponses) -> None:
        m.post(LOGIN, callback=self.login, repeat=True)
        for method in ("GET", "POST", "DELETE"):
            m.add(ANY_URL, method, callback=self.data, repeat=True)
