"""The upstream client: signing, retries, re-login, errors — faults injected at the HTTP seam
with aioresponses; the happy paths run against the emulator elsewhere."""

from __future__ import annotations

import hashlib
import re
from email.utils import formatdate
from typing import Any

import aiohttp
import pytest
from aioresponses import aioresponses
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.channel.signing import Credentials, sign
from sync.core.config import parse_config
from sync.core.errors import (
    AuthError,
    BadResponseError,
    ForbiddenError,
    NotFoundError,
    RetriesExhaustedError,
)
from sync.model import catalogue

BASE = "http://upstream.test"
PASSWORD = "pw-very-secret-42"
DEALS = re.compile(r"^http://upstream\.test/deals\?.*$")
LOGIN = f"{BASE}/accounts/login"


def token_doc(token: str = "tok-abc") -> dict[str, Any]:
    return {"data": {"id": "1", "type": "accounts", "attributes": {"authentication_token": token}}}


def page_doc(n: int = 2, last: int = 1) -> dict[str, Any]:
    return {
        "data": [
            {"id": str(i), "type": "deals", "attributes": {"title": "x"}} for i in range(1, n + 1)
        ],
        "links": {"last": f"{BASE}/deals?page%5Bnumber%5D={last}&page%5Bsize%5D=100"},
        "meta": {"scripts": []},
    }


class FakeSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client(sleep: FakeSleep | None = None, **upstream: Any) -> ChannelClient:
    # No request budget by default here: it keeps real time, which a FakeSleep does not
    # advance (tests/test_budget.py runs it on a fake clock; the e2e suites run it as shipped).
    settings = parse_config(
        {
            "upstream": {
                "base_url": BASE,
                "email": "a@b.c",
                "password": PASSWORD,
                "max_backoff": 1.0,
                "max_requests_per_second": 0,
                **upstream,
            }
        }
    )
    return ChannelClient(settings.upstream, sleep=sleep or FakeSleep())


def test_signature_is_md5_of_timestamp_and_token() -> None:
    assert sign("tok", 1700000000) == hashlib.md5(b"1700000000:tok").hexdigest()
    creds = Credentials("a@b.c", clock=lambda: 1700000000.4)
    creds.set_token("tok")
    p = creds.params()
    assert p == {
        "auth_id": "a@b.c",
        "auth_timestamp": "1700000000",
        "auth_token": sign("tok", 1700000000),
    }
    creds.learn_offset(formatdate(1700000100, usegmt=True))  # upstream 100 s ahead
    assert creds.params()["auth_timestamp"] == "1700000100"


async def test_every_listing_parameter_is_explicit_and_sort_can_be_overridden() -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, payload=page_doc())
        m.get(DEALS, payload=page_doc())
        async with client() as c:
            await c.list_page(
                catalogue.TYPES["deals"], 3, scope_params={"filter[visibility]": "Unlisted"}
            )
            await c.list_page(
                catalogue.TYPES["deals"],
                1,
                params={"sort": "updated_at"},
                fields=["updated_at"],
                include=False,
            )
        urls = [str(k[1]) for k in m.requests if k[0] == "GET"]
        calls = [c for k, v in m.requests.items() if k[0] == "GET" for c in v]
        first, second = (dict(c.kwargs["params"]) for c in calls)
    assert urls
    assert first["page[size]"] == "100" and first["page[number]"] == "3" and first["sort"] == "id"
    assert (
        first["include"] == "images,images.tags,tags,tags.tags,stores"
        and first["filter[visibility]"] == "Unlisted"
    )
    assert {"auth_id", "auth_timestamp", "auth_token"} <= set(first)
    assert (
        second["sort"] == "updated_at"
        and second["fields[deals]"] == "updated_at"
        and "include" not in second
    )


async def test_retries_5xx_then_succeeds() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, status=503)
        m.get(DEALS, status=500)
        m.get(DEALS, payload=page_doc(3))
        async with client(sleep) as c:
            page = await c.list_page(catalogue.TYPES["deals"], 1)
            assert c.stats.retries == 2
    assert len(page.resources) == 3 and len(sleep.calls) == 2


async def test_429_honours_retry_after() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, status=429, headers={"Retry-After": "7"})
        m.get(DEALS, payload=page_doc())
        async with client(sleep, retry_budget=60) as c:
            await c.list_page(catalogue.TYPES["deals"], 1)
    assert sleep.calls == [7.0]


async def test_dropped_connection_and_timeout_are_retried() -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, exception=aiohttp.ServerDisconnectedError())
        m.get(DEALS, exception=TimeoutError())
        m.get(DEALS, payload=page_doc())
        async with client() as c:
            page = await c.list_page(catalogue.TYPES["deals"], 1)
    assert len(page.resources) == 2


async def test_budget_exhausted_names_the_cause() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, status=502, repeat=True)
        async with client(sleep, retry_budget=0.5, max_backoff=0.2) as c:
            with pytest.raises(RetriesExhaustedError, match="HTTP 502") as info:
                await c.list_page(catalogue.TYPES["deals"], 1)
    assert "retry_budget" in str(info.value)


async def test_401_relogs_in_once_then_gives_up() -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc("t1"), status=201)
        m.get(DEALS, status=401)
        m.post(LOGIN, payload=token_doc("t2"), status=201)
        m.get(DEALS, payload=page_doc())
        async with client() as c:
            await c.list_page(catalogue.TYPES["deals"], 1)
            assert c.stats.relogins >= 1
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201, repeat=True)
        m.get(DEALS, status=401, repeat=True)
        async with client() as c:
            with pytest.raises(AuthError):
                await c.list_page(catalogue.TYPES["deals"], 1)


async def test_login_refused_and_status_errors() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=401, payload={"errors": [{"detail": "bad"}]})
        async with client() as c:
            with pytest.raises(AuthError, match="login refused"):
                await c.login()
    for status, exc in ((403, ForbiddenError), (404, NotFoundError)):
        with aioresponses() as m:
            m.post(LOGIN, payload=token_doc(), status=201)
            m.get(DEALS, status=status, payload={"errors": [{"detail": "nope"}]})
            async with client() as c:
                with pytest.raises(exc):
                    await c.list_page(catalogue.TYPES["deals"], 1)


@pytest.mark.parametrize(
    "body", [b'{"data": [{"id": "1"', b'{"errors": []}', b"[]", b'{"data": [{"type": "x"}]}']
)
async def test_truncated_or_off_spec_pages_are_errors_not_empty_pages(body: bytes) -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, body=body, content_type="application/vnd.api+json")
        async with client() as c:
            with pytest.raises(BadResponseError):
                await c.list_page(catalogue.TYPES["deals"], 1)


async def test_api_major_change_warns_once() -> None:
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, payload=token_doc(), status=201, headers={"X-API-Version": "v12.1.0"})
        m.get(DEALS, payload=page_doc(), headers={"X-API-Version": "v13.0.0"}, repeat=True)
        async with client() as c:
            for _ in range(3):
                await c.list_page(catalogue.TYPES["deals"], 1)
            assert c.api_version == "v13.0.0"
    assert [e["event"] for e in logs].count("upstream.api_major_changed") == 1


async def test_secrets_never_in_errors_or_logs() -> None:
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, payload=token_doc("tok-SECRET-123"), status=201)
        m.get(DEALS, status=500, repeat=True)
        async with client(retry_budget=0.3, max_backoff=0.1) as c:
            with pytest.raises(RetriesExhaustedError) as info:
                await c.list_page(catalogue.TYPES["deals"], 1)
    text = str(info.value) + repr(logs)
    assert PASSWORD not in text and "tok-SECRET-123" not in text
    assert "auth_token=" not in text or "auth_token=%2A%2A%2A" in text or "auth_token=***" in text


async def test_fetch_ids_limits_batches() -> None:
    async with client() as c:
        with pytest.raises(ValueError, match="at most 100"):
            await c.fetch_ids(catalogue.TYPES["deals"], list(range(101)))
