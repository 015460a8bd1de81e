"""The upstream client, unit level: signing, clock skew, sessions, retries, errors, secrets
and the listing routes, with faults and answers injected at the HTTP seam (aioresponses).

A small fake upstream (`FakeUpstream`) checks signatures the way the spec describes, so
re-login, clock skew and concurrency are tested on behaviour rather than on the order of canned
answers; the other faults are canned answers. Sleeps are faked: every test is instant. The
happy paths run against the emulator elsewhere.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import random
from collections.abc import Iterator
from email.utils import formatdate

import aiohttp
import orjson
import pytest
from aioresponses import aioresponses
from structlog.testing import capture_logs

from sync.channel.includes import IncludeFallback
from sync.channel.listing import Listing
from sync.channel.profile import META_KEY as PROFILE_KEY
from sync.channel.profile import UpstreamProfile, contradicted
from sync.channel.session import RELOGINS
from sync.channel.signing import Credentials, sign
from sync.channel.transport import RetryPolicy, retry_after, scrub
from sync.channel.webhooks import WebhookEndpoints
from sync.core.errors import (
    AuthError,
    BadResponseError,
    ForbiddenError,
    NotFoundError,
    RetriesExhaustedError,
    UpstreamError,
)
from sync.model import catalogue
from sync.model.scopes import Scope
from tests.support.channel_fakes import (
    BASE,
    DEALS_URL,
    LOGIN,
    NOW,
    PASSWORD,
    FakeSleep,
    FakeUpstream,
    collection,
    make_client,
    page_doc,
    token_doc,
)

DEALS = catalogue.TYPES["deals"]


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, aioresponses]]:
    fake = FakeUpstream()
    with aioresponses() as m:
        fake.install(m)
        yield fake, m


# -- signing and clock skew --------------------------------------------------------------------


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


async def test_requests_are_signed_with_a_ten_digit_timestamp(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    async with make_client(clock=lambda: NOW + 0.7) as c:
        await c.list_page(Scope(DEALS), 1)
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
        assert c.session.clock_offset == 0
        page = await c.list_page(
            Scope(DEALS), 1
        )  # the login's Date already corrects the first call
        assert c.session.clock_offset == pytest.approx(120)
    assert len(page.resources) == 2 and fake.logins == 1
    assert fake.requests[0].query["auth_timestamp"] == "1700000120"


async def test_small_skews_below_the_date_resolution_are_ignored(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    async with make_client(clock=lambda: NOW + 0.9) as c:
        await c.list_page(Scope(DEALS), 1)
        assert c.session.clock_offset == 0.0


# -- sessions ----------------------------------------------------------------------------------


async def test_login_posts_the_json_api_body_without_auth_params() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        async with make_client() as c:
            await c.session.login()
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
        await c.list_page(Scope(DEALS), 1)
        fake.logout()
        page = await c.list_page(Scope(DEALS), 2)
        assert c.session.stats.relogins == 1 and c.session.stats.statuses[401] == 1
    assert fake.logins == 2 and page.number == 2


async def test_concurrent_401s_share_one_relogin(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.delay = 0.01
    async with make_client(clock=lambda: NOW, concurrency=8) as c:
        await c.session.login()
        fake.logout()
        pages = await asyncio.gather(*(c.list_page(Scope(DEALS), n) for n in range(1, 7)))
        assert c.session.stats.relogins == 1
    assert fake.logins == 2 and [p.number for p in pages] == [1, 2, 3, 4, 5, 6]


async def test_401_after_every_relogin_is_an_auth_error(
    upstream: tuple[FakeUpstream, aioresponses],
) -> None:
    fake, _ = upstream
    fake.reject_all = True
    async with make_client(clock=lambda: NOW) as c:
        with pytest.raises(AuthError, match="fresh session") as info:
            await c.list_page(Scope(DEALS), 1)
    assert fake.logins == 1 + RELOGINS and info.value.status == 401
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
        await c.list_page(Scope(DEALS), 1)
        fake.logout()
        fake.clock_jump_at_login = 120.0
        page = await c.list_page(Scope(DEALS), 2)
        assert c.session.clock_offset == pytest.approx(120) and c.session.stats.relogins == 1
    assert page.number == 2 and fake.logins == 2
    assert fake.requests[-1].query["auth_timestamp"] == str(int(NOW + 120))


async def test_login_refused_and_status_errors() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=401, payload={"errors": [{"detail": "bad"}]})
        async with make_client() as c:
            with pytest.raises(AuthError, match="login refused"):
                await c.session.login()
    for status, exc in ((403, ForbiddenError), (404, NotFoundError)):
        with aioresponses() as m:
            m.post(LOGIN, payload=token_doc(), status=201)
            m.get(DEALS_URL, status=status, payload={"errors": [{"detail": "nope"}]})
            async with make_client() as c:
                with pytest.raises(exc):
                    await c.list_page(Scope(catalogue.TYPES["deals"]), 1)


# -- retries -----------------------------------------------------------------------------------


async def test_retries_5xx_then_succeeds() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, status=503)
        m.get(DEALS_URL, status=500)
        m.get(DEALS_URL, payload=page_doc(3))
        async with make_client(sleep) as c:
            page = await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
            assert c.session.stats.retries == 2
    assert len(page.resources) == 3 and len(sleep.calls) == 2


async def test_every_5xx_is_retried_other_4xx_are_not() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, status=501)
        m.get(DEALS_URL, status=599)
        m.get(DEALS_URL, payload=collection([1]))
        m.get(
            DEALS_URL,
            status=400,
            payload={"errors": [{"status": "400", "detail": "unknown filter filter[x]"}]},
        )
        async with make_client(sleep) as c:
            await c.list_page(Scope(DEALS), 1)
            with pytest.raises(UpstreamError, match=r"unknown filter filter\[x\]") as info:
                await c.list_page(Scope(DEALS), 1)
    assert type(info.value) is UpstreamError and info.value.status == 400
    assert len(sleep.calls) == 2


async def test_429_honours_retry_after() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, status=429, headers={"Retry-After": "7"})
        m.get(DEALS_URL, payload=page_doc())
        async with make_client(sleep, retry_budget=60) as c:
            await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    assert sleep.calls == [7.0]


async def test_dropped_connection_and_timeout_are_retried() -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, exception=aiohttp.ServerDisconnectedError())
        m.get(DEALS_URL, exception=TimeoutError())
        m.get(DEALS_URL, payload=page_doc())
        async with make_client() as c:
            page = await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    assert len(page.resources) == 2


async def test_a_body_shorter_than_its_content_length_is_retried_not_parsed() -> None:
    """aiohttp does not always raise when the connection drops after part of a body: the
    transport checks Content-Length itself, so a cut page is fetched again."""
    whole = orjson.dumps(collection([1]))
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, body=whole[: len(whole) // 2], headers={"Content-Length": str(len(whole))})
        m.get(DEALS_URL, body=whole, headers={"Content-Length": str(len(whole))})
        async with make_client() as c:
            page = await c.list_page(Scope(DEALS), 1)
            assert [r["id"] for r in page.resources] == ["1"]
            assert (
                c.session.stats.errors == {"ClientPayloadError": 1} and c.session.stats.retries == 1
            )


async def test_payload_errors_are_retried_and_counted() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, exception=aiohttp.ClientPayloadError("cut"))
        m.get(DEALS_URL, exception=aiohttp.ClientConnectionError("reset"))
        m.get(DEALS_URL, payload=collection([1]))
        async with make_client() as c:
            await c.list_page(Scope(DEALS), 1)
            assert c.session.stats.errors == {"ClientPayloadError": 1, "ClientConnectionError": 1}
            assert c.session.stats.retries == 2


async def test_budget_exhausted_names_the_cause() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, status=502, repeat=True)
        async with make_client(sleep, retry_budget=0.5, max_backoff=0.2) as c:
            with pytest.raises(RetriesExhaustedError, match="HTTP 502") as info:
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    assert "retry_budget" in str(info.value)


async def test_backoff_is_jittered_and_capped_and_the_budget_is_virtual_time() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, status=503, repeat=True)
        async with make_client(sleep, retry_budget=20, max_backoff=2.0) as c:
            with pytest.raises(RetriesExhaustedError, match="last: HTTP 503"):
                await c.list_page(Listing(Scope(DEALS), include=False), 1)
    # The fake sleeps are what used the budget: no real time passed.
    assert 15 < sum(sleep.calls) <= 20
    assert all(0 <= s <= 2.0 for s in sleep.calls) and len(set(sleep.calls)) > 1


async def test_retry_after_as_an_http_date_uses_the_upstream_clock() -> None:
    sleep = FakeSleep()
    server = NOW + 300  # upstream ahead of us: the Date header teaches the offset first
    with aioresponses() as m:
        m.post(
            LOGIN,
            status=201,
            payload={"data": {"attributes": {"authentication_token": "t"}}},
            headers={"Date": formatdate(server, usegmt=True)},
        )
        m.get(
            DEALS_URL,
            status=429,
            headers={
                "Date": formatdate(server, usegmt=True),
                "Retry-After": formatdate(server + 12, usegmt=True),
            },
        )
        m.get(DEALS_URL, payload=collection([1]))
        async with make_client(sleep, clock=lambda: NOW, retry_budget=60) as c:
            await c.list_page(Scope(DEALS), 1)
    assert sleep.calls == [pytest.approx(12)]


async def test_retry_after_beyond_the_budget_fails_at_once() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, status=429, headers={"Retry-After": "3600"})
        async with make_client(sleep, retry_budget=60) as c:
            with pytest.raises(RetriesExhaustedError, match="HTTP 429"):
                await c.list_page(Scope(DEALS), 1)
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
        await asyncio.gather(*(c.list_page(Scope(DEALS), n) for n in range(1, 13)))
    assert fake.max_in_flight == 3


# -- answers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b'{"data": [{"id": "1"', b'{"errors": []}', b"[]", b'{"data": [{"type": "x"}]}']
)
async def test_truncated_or_off_spec_pages_are_errors_not_empty_pages(body: bytes) -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, body=body, content_type="application/vnd.api+json")
        async with make_client() as c:
            with pytest.raises(BadResponseError):
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)


async def test_api_major_change_warns_once() -> None:
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, payload=token_doc(), status=201, headers={"X-API-Version": "v12.1.0"})
        m.get(DEALS_URL, payload=page_doc(), headers={"X-API-Version": "v13.0.0"}, repeat=True)
        async with make_client() as c:
            for _ in range(3):
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
            assert c.session.api_version == "v13.0.0"
    assert [e["event"] for e in logs].count("upstream.api_major_changed") == 1


async def test_stats_exist_before_the_session_opens() -> None:
    c = make_client()
    assert c.session.stats.requests == 0 and c.session.stats.retries == 0
    with pytest.raises(RuntimeError, match="async with"):
        await c.list_page(Scope(DEALS), 1)


# -- secrets -----------------------------------------------------------------------------------


async def test_secrets_never_in_errors_or_logs() -> None:
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, payload=token_doc("tok-SECRET-123"), status=201)
        m.get(DEALS_URL, status=500, repeat=True)
        async with make_client(retry_budget=0.3, max_backoff=0.1) as c:
            with pytest.raises(RetriesExhaustedError) as info:
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    text = str(info.value) + repr(logs)
    assert PASSWORD not in text and "tok-SECRET-123" not in text
    assert "auth_token=" not in text or "auth_token=%2A%2A%2A" in text or "auth_token=***" in text


async def test_secrets_stay_out_of_errors_and_logs_on_every_failure_path() -> None:
    token = "tok-TOPSECRET-9"
    secret_url = f"{BASE}/deals?auth_token=abcdef0123&auth_id=me@example.com"
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": token}}})
        m.get(
            DEALS_URL, exception=aiohttp.ClientConnectionError(f"reset while fetching {secret_url}")
        )
        m.get(DEALS_URL, status=418, body=f"<html>teapot at {secret_url}</html>".encode())
        m.get(DEALS_URL, status=404, payload={"errors": [{"detail": "no route"}]})
        errors: list[str] = []
        async with make_client(retry_budget=30) as c:
            for _ in range(2):
                with pytest.raises(UpstreamError) as info:
                    await c.list_page(Scope(DEALS), 1)
                errors.append(str(info.value) + repr(info.value.__cause__))
    text = " ".join(errors) + repr(logs)
    for secret in (PASSWORD, token, "abcdef0123", "auth_id=me@example.com"):
        assert secret not in text
    assert "me@example.com" not in repr(logs)


def test_scrub_masks_auth_params_in_free_text() -> None:
    assert scrub("GET /x?auth_token=ab12&auth_timestamp=1700000000&a=1") == (
        "GET /x?auth_token=***&auth_timestamp=***&a=1"
    )


# -- the client's parts --------------------------------------------------------------------------


class DictStore:
    """A `_sync_meta` in a dict."""

    def __init__(self) -> None:
        self.meta: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.meta.get(key)

    def set(self, key: str, value: str) -> None:
        self.meta[key] = value


def test_the_store_given_to_the_client_restores_and_keeps_its_profile() -> None:
    store = DictStore()
    first = make_client(store=store)
    assert first.profile is None
    marked = first.learn_profile(save=False)  # the profile to change, kept in memory only
    assert contradicted(marked, "/deals", "rows out of order")
    assert PROFILE_KEY not in store.meta
    first.learn_profile()  # the change made in place, now kept
    again = make_client(store=store)
    assert again.profile is not None and again.profile.routes["/deals"].sort == "ignored"
    probed = UpstreamProfile(probed_at="2026-01-01T00:00:00.000Z")
    again.learn_profile(probed)  # a probe's profile replaces it
    assert again.profile is probed
    assert UpstreamProfile.from_json(store.meta[PROFILE_KEY]) == probed


def test_the_client_holds_its_include_fallback_and_webhooks_instead_of_inheriting() -> None:
    client = make_client()
    assert isinstance(client.includes, IncludeFallback) and client.includes.client is client
    assert (
        isinstance(client.webhooks, WebhookEndpoints) and client.webhooks.session is client.session
    )
    methods = inspect.getmembers(type(client), inspect.isfunction)
    public = [name for name, _ in methods if not name.startswith("_")]
    assert len(public) <= 25, public


def test_the_retry_policy_waits_at_least_what_retry_after_asks() -> None:
    policy = RetryPolicy(budget=30.0, max_backoff=1.0, rng=random.Random(1))
    assert all(0.0 <= policy.backoff(n) <= 1.0 for n in range(1, 20))
    assert policy.delay(3, 5.0) == 5.0
    assert policy.delay(3, None) <= 1.0


def test_a_listing_request_is_one_value_built_from_its_scope() -> None:
    stores = Scope(catalogue.TYPES["stores"], 7)
    assert Listing.of(stores) == Listing(stores) and Listing.of(stores).include
    asked = Listing(stores, {"sort": "updated_at"}, ["updated_at"], include=False, size=10)
    assert Listing.of(asked) is asked
    assert asked.path == "/malls/7/stores" and asked.rtype.name == "stores"
    query = make_client().query(asked, 3)
    assert query == {
        "page[size]": "10",
        "page[number]": "3",
        "sort": "updated_at",
        "fields[stores]": "updated_at",
    }
