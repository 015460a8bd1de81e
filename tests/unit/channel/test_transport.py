"""`sync.channel.transport`: the retry policy apart from one attempt, and `Transport.send` over
a real aiohttp session with its answers injected at the HTTP seam (aioresponses)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from email.utils import formatdate

import aiohttp
import pytest
from aioresponses import aioresponses

from sync.channel.protocols import Sender
from sync.channel.transport import (
    RetryPolicy,
    Transport,
    TransportSettings,
    is_retryable,
    retry_after,
    scrub,
)
from sync.core.errors import MaybeAppliedError, RetriesExhaustedError
from tests.support.channel_fakes import NOW, FakeSleep

URL = "http://upstream.test/deals"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (200, False),
        (304, False),
        (400, False),
        (401, False),
        (404, False),
        (429, True),
        (500, True),
        (503, True),
    ],
)
def test_only_5xx_and_429_are_retried(status: int, retryable: bool) -> None:
    assert is_retryable(status) is retryable


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        (formatdate(NOW + 30, usegmt=True), 30.0),
        (formatdate(NOW - 30, usegmt=True), 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_delta_seconds_and_http_dates(
    header: str | None, seconds: float | None
) -> None:
    got = retry_after(header, NOW)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_the_delay_is_full_jitter_below_the_capped_exponential() -> None:
    policy = RetryPolicy(budget=60.0, max_backoff=1.0, rng=random.Random(3))
    first = [policy.delay(1, None) for _ in range(200)]
    assert all(0.0 <= d <= 0.5 for d in first) and len(set(first)) > 100
    assert all(0.0 <= policy.delay(12, None) <= 1.0 for _ in range(200))  # capped


def test_a_retry_after_is_a_floor_under_the_backoff() -> None:
    policy = RetryPolicy(budget=60.0, max_backoff=1.0, rng=random.Random(3))
    assert policy.delay(1, 30.0) == 30.0  # the upstream asked for at least that long
    assert all(policy.delay(8, 0.0) >= 0.0 for _ in range(50))


def test_scrub_hides_the_signature_and_secrets_in_free_text() -> None:
    text = scrub(
        "Cannot connect to http://u.test/deals?auth_id=me%40x.com&auth_timestamp=1700000000"
        "&auth_token=0123abcd&page%5Bsize%5D=100"
    )
    assert "0123abcd" not in text and "me%40x.com" not in text
    assert "page%5Bsize%5D=100" in text


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def transport(http: aiohttp.ClientSession, sleep: FakeSleep, *, budget: float = 60.0) -> Transport:
    return Transport(
        http,
        TransportSettings(
            concurrency=2, timeout=5.0, retry=RetryPolicy(budget, 1.0, rng=random.Random(1))
        ),
        sleep=sleep,
        upstream_now=lambda: NOW,
    )


async def test_a_5xx_is_attempted_again_and_every_answer_is_observed(
    http: aiohttp.ClientSession,
) -> None:
    sleep, seen = FakeSleep(), []
    t = transport(http, sleep)
    with aioresponses() as m:
        m.get(URL, status=503)
        m.get(URL, status=200, body=b"{}")
        resp = await t.send("GET", URL, observe=seen.append)
    assert resp.status == 200 and resp.body == b"{}"
    assert [r.status for r in seen] == [503, 200]  # retried answers too
    assert t.stats.statuses == {503: 1, 200: 1} and t.stats.retries == 1
    assert len(sleep.calls) == 1


async def test_a_429_waits_at_least_its_retry_after(http: aiohttp.ClientSession) -> None:
    sleep = FakeSleep()
    t = transport(http, sleep)
    with aioresponses() as m:
        m.get(URL, status=429, headers={"Retry-After": "7"})
        m.get(URL, status=200, body=b"{}")
        assert (await t.send("GET", URL)).status == 200
    assert sleep.calls[0] >= 7.0


async def test_a_small_5xx_allowance_ends_in_retries_exhausted_with_the_status(
    http: aiohttp.ClientSession,
) -> None:
    t = transport(http, FakeSleep())
    with aioresponses() as m:
        m.get(URL, status=500, repeat=True)
        with pytest.raises(RetriesExhaustedError, match="2 times") as info:
            await t.send("GET", URL, attempts=2)
    assert info.value.status == 500 and t.stats.statuses == {500: 2}


async def test_the_retry_budget_bounds_the_attempts_and_waits_together(
    http: aiohttp.ClientSession,
) -> None:
    sleep = FakeSleep()
    t = transport(http, sleep, budget=3.0)
    with aioresponses() as m:
        m.get(URL, status=503, repeat=True)
        with pytest.raises(RetriesExhaustedError, match="last: HTTP 503"):
            await t.send("GET", URL)
    assert sum(sleep.calls) <= 3.0 and t.stats.statuses[503] == len(sleep.calls) + 1


async def test_a_request_sent_once_is_never_repeated_after_a_5xx(
    http: aiohttp.ClientSession,
) -> None:
    t = transport(http, FakeSleep())
    with aioresponses() as m:
        m.post(URL, status=502, repeat=True)
        with pytest.raises(MaybeAppliedError, match="may have taken effect"):
            await t.send("POST", URL, json={"x": 1}, once=True)
    assert t.stats.statuses == {502: 1}


async def test_the_parameters_are_asked_afresh_for_each_attempt(
    http: aiohttp.ClientSession,
) -> None:
    calls: list[int] = []

    def params() -> dict[str, str]:
        calls.append(len(calls))
        return {"n": str(len(calls))}

    t = transport(http, FakeSleep())
    with aioresponses() as m:
        m.get(URL + "?n=1", status=503)
        m.get(URL + "?n=2", status=200, body=b"{}")
        resp = await t.send("GET", URL, params=params)
    assert resp.status == 200 and calls == [0, 1]


async def test_the_transport_closes_its_session_and_is_a_sender() -> None:
    http = aiohttp.ClientSession()
    t: Sender = transport(http, FakeSleep())  # the protocol the session holds it by
    await t.aclose()
    assert http.closed
