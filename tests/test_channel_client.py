"""The upstream client, unit level: faults and answers injected at the HTTP seam (aioresponses).

Complements `test_channel.py` with a small fake upstream (`FakeUpstream`) that checks signatures
the way the spec describes, so re-login, clock skew and concurrency are tested on behaviour rather
than on the order of canned answers. Sleeps are faked: every test is instant.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterator
from datetime import date
from email.utils import formatdate
from typing import Any

import aiohttp
import orjson
import pytest
from aioresponses import CallbackResult, aioresponses
from structlog.testing import capture_logs
from yarl import URL

from sync.channel.client import ChannelClient
from sync.channel.pages import Page, last_page_number
from sync.channel.transport import retry_after, scrub
from sync.core.config import parse_config
from sync.core.errors import AuthError, RetriesExhaustedError, UpstreamError
from sync.model import catalogue

BASE = "http://upstream.test"
LOGIN = f"{BASE}/accounts/login"
PASSWORD = "pw-Sup3r-secret"
NOW = 1_700_000_000.0
ANY_GET = re.compile(r"^http://upstream\.test/.*$")


class FakeSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_client(
    sleep: FakeSleep | None = None, clock: Any = None, **upstream: Any
) -> ChannelClient:
    settings = parse_config(
        {
            "upstream": {
                "base_url": BASE,
                "email": "me@example.com",
                "password": PASSWORD,
                "max_backoff": 1.0,
                # The request budget keeps real time, which a FakeSleep does not advance
                # (tests/test_budget.py runs it on a fake clock).
                "max_requests_per_second": 0,
                **upstream,
            }
        }
    )
    kwargs: dict[str, Any] = {"sleep": sleep or FakeSleep()}
    if clock is not None:
        kwargs["clock"] = clock
    return ChannelClient(settings.upstream, **kwargs)


def collection(
    ids: list[int], *, last: int = 1, rtype: str = "deals", included: int = 0
) -> dict[str, Any]:
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
            and q.get("auth_id") == "me@example.com"
        )
        if not ok:
            err = {"errors": [{"status": "401", "detail": "invalid signature"}]}
            return CallbackResult(status=401, body=orjson.dumps(err), headers=self.headers())
        body = orjson.dumps(collection([1, 2]))
        return CallbackResult(status=200, body=body, headers=self.headers())

    def install(self, m: aioresponses) -> None:
        m.post(LOGIN, callback=self.login, repeat=True)
        for method in ("GET", "POST", "DELETE"):
            m.add(ANY_GET, method, callback=self.data, repeat=True)


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, aioresponses]]:
    fake = FakeUpstream()
    with aioresponses() as m:
        fake.install(m)
        yield fake, m


DEALS = catalogue.TYPES["deals"]


# -- signing and clock skew ------------------------------------------------------------------


async def test_requests_are_signed_with_a_ten_digit_timestamp(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    async with make_client(clock=lambda: NOW + 0.7) as c:
        await c.list_page(DEALS, 1)
    q = fake.requests[0].query
    assert q["auth_timestamp"] == "1700000000" and len(q["auth_timestamp"]) == 10
    assert q["auth_token"] == hashlib.md5(b"1700000000:token-1").hexdigest()
    assert q["auth_token"] == q["auth_token"].lower()


async def test_clock_skew_is_learned_from_the_date_header(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.server_time = NOW + 120  # our clock is two minutes slow
    async with make_client(clock=lambda: NOW) as c:
        assert c.clock_offset == 0
        page = await c.list_page(DEALS, 1)  # the login's Date already corrects the first call
        assert c.clock_offset == pytest.approx(120)
    assert len(page.resources) == 2 and fake.logins == 1
    assert fake.requests[0].query["auth_timestamp"] == "1700000120"


async def test_small_skews_below_the_date_resolution_are_ignored(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    async with make_client(clock=lambda: NOW + 0.9) as c:
        await c.list_page(DEALS, 1)
        assert c.clock_offset == 0.0


# -- sessions ----------------------------------------------------------------------------------


async def test_login_posts_the_json_api_body_without_auth_params() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        async with make_client() as c:
            await c.login()
        ((key, calls),) = m.requests.items()
    assert key[0] == "POST" and "auth_" not in str(key[1])
    assert calls[0].kwargs["json"] == {
        "data": {
            "type": "accounts",
            "attributes": {"email": "me@example.com", "password": PASSWORD},
        }
    }


async def test_logout_elsewhere_is_cured_by_one_relogin(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    async with make_client(clock=lambda: NOW) as c:
        await c.list_page(DEALS, 1)
        fake.logout()
        page = await c.list_page(DEALS, 2)
        assert c.stats.relogins == 1 and c.stats.statuses[401] == 1
    assert fake.logins == 2 and page.number == 2


async def test_concurrent_401s_share_one_relogin(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.delay = 0.01
    async with make_client(clock=lambda: NOW, concurrency=8) as c:
        await c.login()
        fake.logout()
        pages = await asyncio.gather(*(c.list_page(DEALS, n) for n in range(1, 7)))
        assert c.stats.relogins == 1
    assert fake.logins == 2 and [p.number for p in pages] == [1, 2, 3, 4, 5, 6]


async def test_401_after_the_relogin_is_an_auth_error(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.reject_all = True
    async with make_client(clock=lambda: NOW) as c:
        with pytest.raises(AuthError, match="fresh session") as info:
            await c.list_page(DEALS, 1)
    assert fake.logins == 2 and info.value.status == 401
    assert "token-" not in str(info.value) and PASSWORD not in str(info.value)


async def test_a_401_after_the_relogin_showing_another_skew_is_signed_again(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    """The upstream's clock moves two minutes between the relogin and the retry (or an older
    answer taught the older skew): the retry's 401 carries the new `Date`, so the request is
    signed again with it instead of failing as a refused fresh session (the chaos storm saw a
    restarted daemon exit on this)."""
    fake, _ = upstream
    async with make_client(clock=lambda: NOW) as c:
        await c.list_page(DEALS, 1)
        fake.logout()
        fake.clock_jump_at_login = 120.0
        page = await c.list_page(DEALS, 2)
        assert c.clock_offset == pytest.approx(120) and c.stats.relogins == 1
    assert page.number == 2 and fake.logins == 2
    assert fake.requests[-1].query["auth_timestamp"] == str(int(NOW + 120))


# -- retries -----------------------------------------------------------------------------------


async def test_every_5xx_is_retried_other_4xx_are_not() -> None:
    sleep = FakeSleep()
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, status=501)
        m.get(deals, status=599)
        m.get(deals, payload=collection([1]))
        m.get(
            deals,
            status=400,
            payload={"errors": [{"status": "400", "detail": "unknown filter filter[x]"}]},
        )
        async with make_client(sleep) as c:
            await c.list_page(DEALS, 1)
            with pytest.raises(UpstreamError, match=r"unknown filter filter\[x\]") as info:
                await c.list_page(DEALS, 1)
    assert type(info.value) is UpstreamError and info.value.status == 400
    assert len(sleep.calls) == 2


async def test_a_body_shorter_than_its_content_length_is_retried_not_parsed() -> None:
    """aiohttp does not always raise when the connection drops after part of a body: the
    transport checks Content-Length itself, so a cut page is fetched again."""
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    whole = orjson.dumps(collection([1]))
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, body=whole[: len(whole) // 2], headers={"Content-Length": str(len(whole))})
        m.get(deals, body=whole, headers={"Content-Length": str(len(whole))})
        async with make_client() as c:
            page = await c.list_page(DEALS, 1)
            assert [r["id"] for r in page.resources] == ["1"]
            assert c.stats.errors == {"ClientPayloadError": 1} and c.stats.retries == 1


async def test_payload_errors_are_retried_and_counted() -> None:
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, exception=aiohttp.ClientPayloadError("cut"))
        m.get(deals, exception=aiohttp.ClientConnectionError("reset"))
        m.get(deals, payload=collection([1]))
        async with make_client() as c:
            await c.list_page(DEALS, 1)
            assert c.stats.errors == {"ClientPayloadError": 1, "ClientConnectionError": 1}
            assert c.stats.retries == 2


async def test_backoff_is_jittered_and_capped_and_the_budget_is_virtual_time() -> None:
    sleep = FakeSleep()
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, status=503, repeat=True)
        async with make_client(sleep, retry_budget=20, max_backoff=2.0) as c:
            with pytest.raises(RetriesExhaustedError, match="last: HTTP 503"):
                await c.list_page(DEALS, 1)
    # The fake sleeps are what used the budget: no real time passed.
    assert 15 < sum(sleep.calls) <= 20
    assert all(0 <= s <= 2.0 for s in sleep.calls) and len(set(sleep.calls)) > 1


async def test_retry_after_as_an_http_date_uses_the_upstream_clock() -> None:
    sleep = FakeSleep()
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    server = NOW + 300  # upstream ahead of us: the Date header teaches the offset first
    with aioresponses() as m:
        m.post(
            LOGIN,
            status=201,
            payload={"data": {"attributes": {"authentication_token": "t"}}},
            headers={"Date": formatdate(server, usegmt=True)},
        )
        m.get(
            deals,
            status=429,
            headers={
                "Date": formatdate(server, usegmt=True),
                "Retry-After": formatdate(server + 12, usegmt=True),
            },
        )
        m.get(deals, payload=collection([1]))
        async with make_client(sleep, clock=lambda: NOW, retry_budget=60) as c:
            await c.list_page(DEALS, 1)
    assert sleep.calls == [pytest.approx(12)]


async def test_retry_after_beyond_the_budget_fails_at_once() -> None:
    sleep = FakeSleep()
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, status=429, headers={"Retry-After": "3600"})
        async with make_client(sleep, retry_budget=60) as c:
            with pytest.raises(RetriesExhaustedError, match="HTTP 429"):
                await c.list_page(DEALS, 1)
    assert sleep.calls == []


def test_retry_after_parsing() -> None:
    assert retry_after("7", NOW) == 7.0
    assert retry_after(" 1.5 ", NOW) == 1.5
    assert retry_after(formatdate(NOW + 30, usegmt=True), NOW) == pytest.approx(30)
    assert retry_after(formatdate(NOW - 30, usegmt=True), NOW) == 0.0
    assert retry_after("soon", NOW) is None and retry_after(None, NOW) is None


async def test_requests_in_flight_are_bounded_by_concurrency(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.delay = 0.01
    async with make_client(clock=lambda: NOW, concurrency=3) as c:
        await asyncio.gather(*(c.list_page(DEALS, n) for n in range(1, 13)))
    assert fake.max_in_flight == 3


# -- secrets -------------------------------------------------------------------------------


async def test_secrets_stay_out_of_errors_and_logs_on_every_failure_path() -> None:
    token = "tok-TOPSECRET-9"
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    secret_url = f"{BASE}/deals?auth_token=abcdef0123&auth_id=me@example.com"
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": token}}})
        m.get(deals, exception=aiohttp.ClientConnectionError(f"reset while fetching {secret_url}"))
        m.get(deals, status=418, body=f"<html>teapot at {secret_url}</html>".encode())
        m.get(deals, status=404, payload={"errors": [{"detail": "no route"}]})
        errors: list[str] = []
        async with make_client(retry_budget=30) as c:
            for _ in range(2):
                with pytest.raises(UpstreamError) as info:
                    await c.list_page(DEALS, 1)
                errors.append(str(info.value) + repr(info.value.__cause__))
    text = " ".join(errors) + repr(logs)
    for secret in (PASSWORD, token, "abcdef0123", "auth_id=me@example.com"):
        assert secret not in text
    assert "me@example.com" not in repr(logs)


def test_scrub_masks_auth_params_in_free_text() -> None:
    assert scrub("GET /x?auth_token=ab12&auth_timestamp=1700000000&a=1") == (
        "GET /x?auth_token=***&auth_timestamp=***&a=1"
    )


# -- the listing routes ----------------------------------------------------------------------


def params_of(m: aioresponses) -> list[dict[str, str]]:
    return [
        {k: v for k, v in key[1].query.items() if not k.startswith("auth_")}
        for key, calls in m.requests.items()
        for _ in calls
        if key[0] == "GET"
    ]


async def test_mall_scoped_listing_fields_and_explicit_params() -> None:
    stores = re.compile(r"^http://upstream\.test/malls/7/stores\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(stores, payload=collection([1], rtype="stores"))
        m.get(stores, payload=collection([1], rtype="stores"))
        async with make_client(page_size=50) as c:
            await c.list_page(catalogue.TYPES["stores"], 2, mall_id=7, size=10)
            await c.list_page(catalogue.TYPES["stores"], 1, mall_id=7, fields=[])
        with pytest.raises(ValueError, match="mall id"):
            catalogue.TYPES["stores"].list_path(None)
        first, second = sorted(params_of(m), key=lambda p: p["page[size]"])
    assert first["page[size]"] == "10" and first["page[number]"] == "2" and first["sort"] == "id"
    assert first["include"] == catalogue.TYPES["stores"].include
    assert "fields[stores]" not in first
    assert second["page[size]"] == "50" and second["fields[stores]"] == ""


async def test_iter_pages_follows_links_last_and_stops_on_an_empty_page() -> None:
    deals = re.compile(r"^http://upstream\.test/deals\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(deals, payload=collection([1, 2], last=3))
        m.get(deals, payload=collection([3, 4], last=3, included=2))
        m.get(deals, payload=collection([5], last=3))
        m.get(deals, payload=collection([], last=9))
        m.get(deals, payload=collection([6], last=9))
        async with make_client() as c:
            pages = [p async for p in c.iter_pages(DEALS)]
            more = [p async for p in c.iter_pages(DEALS, start=4)]
    assert [p.number for p in pages] == [1, 2, 3] and pages[0].last == 3
    assert [r["id"] for p in pages for r in p.resources] == ["1", "2", "3", "4", "5"]
    assert len(pages[1].included) == 2 and pages[0].meta["scripts"]
    assert pages[0].api_version is None
    assert [p.number for p in more] == [4] and more[0].resources == []


async def test_fetch_ids_and_deletions_and_webhooks_params() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(re.compile(r"^http://upstream\.test/deals\?.*"), payload=collection([3, 5]))
        m.get(
            re.compile(r"^http://upstream\.test/deletions\?.*"),
            payload=collection([9], rtype="deletions"),
        )
        m.get(
            re.compile(r"^http://upstream\.test/webhooks\?.*page%5Bnumber%5D=1.*"),
            payload=collection([1, 2], last=2, rtype="webhooks"),
        )
        m.get(
            re.compile(r"^http://upstream\.test/webhooks\?.*page%5Bnumber%5D=2.*"),
            payload=collection([3], last=2, rtype="webhooks"),
        )
        m.post(
            re.compile(r"^http://upstream\.test/webhooks\?.*"),
            status=201,
            payload={"data": {"id": "4", "type": "webhooks"}},
        )
        m.delete(re.compile(r"^http://upstream\.test/webhooks/4\?.*"), status=204)
        async with make_client() as c:
            page = await c.fetch_ids(DEALS, [3, "5"])
            empty = await c.fetch_ids(DEALS, [])
            dels = await c.list_deletions(2, since="2024-01-01T00:00:00.000Z", size=20)
            hooks = await c.list_webhooks()
            sub = await c.subscribe("http://127.0.0.1:9/hook", "deals")
            await c.unsubscribe("4")
        gets = params_of(m)
        posts = [calls[0].kwargs["json"] for key, calls in m.requests.items() if key[0] == "POST"]
    fetch = next(p for p in gets if "filter[id]" in p)
    assert fetch["filter[id]"] == "3,5" and fetch["page[size]"] == "100"
    assert fetch["page[number]"] == "1" and fetch["include"] == DEALS.include
    assert [r["id"] for r in page.resources] == ["3", "5"] and empty == Page([], [], {}, 1, 1, None)
    d = next(p for p in gets if "filter[created_at][gte]" in p)
    assert d == {
        "page[size]": "20",
        "page[number]": "2",
        "sort": "created_at",
        "filter[created_at][gte]": "2024-01-01T00:00:00.000Z",
    }
    assert dels.resources[0]["id"] == "9"
    assert [h["id"] for h in hooks] == ["1", "2", "3"]
    hook_params = [p for p in gets if p.get("page[size]") == "100" and "filter[id]" not in p]
    assert all(p["sort"] == "id" for p in hook_params)
    assert sub == {"id": "4", "type": "webhooks"}
    assert posts[-1] == {
        "data": {
            "type": "webhooks",
            "attributes": {"callback_url": "http://127.0.0.1:9/hook", "topic": "deals"},
        }
    }


async def test_hours_and_current_hours() -> None:
    day = {"id": "2024-05-01", "type": "hours", "attributes": {"date": "2024-05-01"}}
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(re.compile(r"^http://upstream\.test/malls/3/hours\?.*"), payload={"data": [day]})
        m.get(
            re.compile(r"^http://upstream\.test/malls/3/current-hours\?.*"),
            payload={"open": True},
        )
        m.get(re.compile(r"^http://upstream\.test/malls/4/hours\?.*"), payload={"days": []})
        async with make_client() as c:
            hours = await c.hours(3, date(2024, 5, 1), date(2024, 5, 7))
            current = await c.current_hours(3)
            with pytest.raises(UpstreamError, match="data"):
                await c.hours(4, date(2024, 5, 1), date(2024, 5, 7))
        q = params_of(m)[0]
    assert hours == [day] and current == {"open": True}
    assert q == {"from": "2024-05-01", "to": "2024-05-07"}


def test_links_last_parsing() -> None:
    assert last_page_number({"links": {"last": f"{BASE}/x?page[number]=12&page[size]=5"}}) == 12
    assert last_page_number({"links": {"last": {"href": f"{BASE}/x?page%5Bnumber%5D=3"}}}) == 3
    assert last_page_number({"links": {"last": f"{BASE}/x?page%5Bnumber%5D=0"}}) == 1
    assert last_page_number({"links": {}}) == 1 and last_page_number({}) == 1


async def test_stats_exist_before_the_session_opens() -> None:
    c = make_client()
    assert c.stats.requests == 0 and c.stats.retries == 0
    with pytest.raises(RuntimeError, match="async with"):
        await c.list_page(DEALS, 1)
