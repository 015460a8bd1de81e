"""The retrying transport: one logical HTTP request, repeated through transient failures.

Retried: every 5xx, 429 (waiting `Retry-After`, delta-seconds or an HTTP date), timeouts and
dropped connections (`ClientConnectionError`, which covers `ServerDisconnectedError`, and
`ClientPayloadError`, a body cut off mid-read). Waits are exponential backoff with full jitter
(uniform in [0, min(max_backoff, base * 2**attempt)]) so that several jobs failing together do
not retry in lock-step. The whole request, attempts and waits together, is bounded by
`retry_budget` seconds, after which `RetriesExhaustedError` names the last cause. One semaphore
bounds the requests in flight across every job sharing the client; it is released while waiting.
Every attempt first takes a slot of the request budget (`sync.channel.budget`), which a 429
slows down.

An upstream that cannot be reached at all before it ever answered (connection refused, DNS
failure, TLS error: aiohttp's `ClientConnectorError` family) will not heal by waiting: it is a
wrong `base_url`, a firewall or a certificate. After `UNREACHABLE_GRACE` seconds of that (a few
attempts, so a blip at boot is forgiven) a one-shot command (`fail_fast`, the default) gets
`UnreachableError` naming the URL and the fix, and every later request of this transport fails
the same way at its first refusal. A daemon (`fail_fast=False`) logs the same error once
(`upstream.unreachable`, again every `UNREACHABLE_REPEAT` s) and keeps retrying with backoff,
outside the retry budget, until the upstream answers. Once any answer arrived, a refused
connection is an ordinary transient fault (the upstream restarting) under the budget.

`sleep` and `clock` are injected so tests run instantly: the budget counts the time each attempt
took on `clock` plus the waits handed to `sleep`, so a fake sleep advances the budget too.
Every wait goes through `sleep`, so cancelling the task (SIGTERM) ends a retry loop at once.

The session holds a transport by what it needs of one (`sync.channel.protocols.Sender`: `send`,
`stats`, `unreachable_reason`, `aclose`), so another can be given in its place, as httpx's
`Client(transport=...)`. The session sees each answer through `send(observe=...)`, per call
rather than a callback set on the transport from outside.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from sync.channel.budget import RequestBudget
from sync.core.errors import MaybeAppliedError, RetriesExhaustedError, UnreachableError, redact_url
from sync.core.logs import get_logger
from sync.core.redact import redact_text

BASE_BACKOFF = 0.25  # seconds; the first retry waits up to 0.5 s, doubling from there
#: Seconds of "cannot connect" before the upstream is called unreachable (see module docstring).
UNREACHABLE_GRACE = 4.0
#: A daemon repeats its `upstream.unreachable` error this often while the upstream stays away.
UNREACHABLE_REPEAT = 300.0


def cut_short(resp: aiohttp.ClientResponse, body: bytes) -> None:
    """Raise `ClientPayloadError` when an identity-encoded body is shorter than its Content-Length.

    aiohttp raises that itself when the connection drops mid-body, but not always: when the
    close races the last read, `read()` has been seen to return the bytes it had. A body cut
    short must be retried, never parsed as a (broken) page.
    """
    expected = resp.content_length
    if expected is not None and len(body) < expected and not resp.headers.get("Content-Encoding"):
        raise aiohttp.ClientPayloadError(
            f"Response payload is not completed: {len(body)} of {expected} bytes"
        )


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,  # asyncio.TimeoutError is TimeoutError since 3.11: aiohttp's timeouts
    aiohttp.ClientConnectionError,  # refused, reset, ServerDisconnectedError
    aiohttp.ClientPayloadError,  # the connection dropped while the body was read
)
#: Failures to open a connection at all: refused, DNS, TLS (subclasses of ClientConnectorError).
#: Connect timeouts are not among them: a slow upstream may heal.
UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientConnectorError,)


def is_retryable(status: int) -> bool:
    """5xx and 429 are the upstream's transient answers; every other status is final."""
    return status >= 500 or status == 429


def scrub(text: str) -> str:
    """Mask auth parameters and secrets inside free text (aiohttp messages may quote the
    request URL; see `sync.core.redact`)."""
    return redact_text(text)


@dataclass
class Stats:
    """Counters for metrics and tests: answers by status, retries, re-logins, transport errors."""

    statuses: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    relogins: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        """HTTP exchanges that got an answer (any status)."""
        return sum(self.statuses.values())


@dataclass(frozen=True)
class Response:
    """A fully read answer: the body is in memory, the connection already released."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """How one logical request is repeated: within `budget` seconds (attempts and waits
    together), waiting full-jitter backoff capped at `max_backoff` between attempts."""

    budget: float
    max_backoff: float
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def backoff(self, attempt: int) -> float:
        """Full jitter: a uniform draw below the capped exponential."""
        return self.rng.uniform(0.0, min(self.max_backoff, BASE_BACKOFF * 2**attempt))

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before the next attempt: a Retry-After is a floor (the upstream asked for
        at least that long)."""
        backoff = self.backoff(attempt)
        return max(retry_after, backoff) if retry_after is not None else backoff


@dataclass(frozen=True)
class TransportSettings:
    """What a transport is configured with: requests in flight, the timeout of one attempt,
    the retry policy, and what an upstream never reached does (`fail_fast`, the config key
    `base_url_key` its error names)."""

    concurrency: int
    timeout: float
    retry: RetryPolicy
    fail_fast: bool = True
    base_url_key: str = "[upstream] base_url"


@dataclass(frozen=True)
class Attempt:
    """What one attempt came to: an answer, or the transport error that replaced it (`cause`),
    the `Retry-After` wait a 429 asked for, and the seconds it took."""

    response: Response | None
    cause: str
    retry_after: float | None
    elapsed: float
    never_reached: bool = False


class Transport:
    """Sends requests through `session` with retries; see the module docstring."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        settings: TransportSettings,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        upstream_now: Callable[[], float] = time.time,
        stats: Stats | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        """`sleep` and `clock` are injected so tests run instantly; `upstream_now` is the
        upstream's clock (Retry-After dates are on it). The transport closes `session`
        (`aclose`): it holds the connections, as httpx's transport holds its pool."""
        self.session = session
        self.settings = settings
        self.retry = settings.retry
        self.budget = budget
        self.limit = asyncio.Semaphore(settings.concurrency)
        self.sleep = sleep
        self.clock = clock
        self.upstream_now = upstream_now
        self.stats = stats if stats is not None else Stats()
        self.log = get_logger("sync.channel")
        self.reached = False  # set by the first answer (any status)
        self.unreachable = False  # set once a fail-fast transport gave up on the upstream
        self._unreachable_logged_at: float | None = None
        #: A daemon's transport while the upstream was never reached: the error, for health.
        self.unreachable_reason: str | None = None

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
        """One logical request: `_attempt` repeated under the retry policy. `params` is called
        per attempt because signatures expire. `budget`: the request budget to take slots from
        instead of the transport's (an account's own, with `budget = "per_account"`).
        `observe` sees every answer, retried ones too (the session learns the upstream's
        `Date` and API version from each, `ChannelSession.observe`).

        `attempts`: a small allowance instead of the retry budget for 5xx answers: after that
        many, `RetriesExhaustedError` carrying the last status (a listing with `include=`
        asks so, and finds out whether one include path causes the 5xx,
        `sync.channel.includes`). 429s and transport errors are retried as usual.

        `once`: a request that is not idempotent (a subscription) is not repeated after a 5xx,
        a timeout or a dropped connection, which may follow its effect: `MaybeAppliedError`.
        A 429 (not processed) and a connection never made are retried as usual."""
        budget = budget if budget is not None else self.budget
        spent = 0.0  # seconds of this request's budget used: attempts plus waits
        attempt = 0
        errors = 0  # 5xx answers, counted against `attempts`
        while True:
            attempt += 1
            remaining = self.retry.budget - spent
            got = await self._attempt(
                method, url, params, json, headers, budget, remaining, observe
            )
            spent += got.elapsed
            if got.response is not None:
                if not is_retryable(got.response.status):
                    return got.response
                if got.response.status >= 500:
                    errors += 1
                    if attempts is not None and errors >= attempts:
                        raise RetriesExhaustedError(
                            f"answered {got.cause} {errors} times in a row",
                            url=url,
                            status=got.response.status,
                            hint="asked with a small allowance; the caller decides what next",
                        )
            delay = self.retry.delay(attempt, got.retry_after)
            if once and got.cause != "HTTP 429" and not got.never_reached:
                raise MaybeAppliedError(
                    f"{method} answered {got.cause}; it may have taken effect",
                    url=url,
                    hint="look the result up before sending it again",
                )
            if got.never_reached and self._will_not_heal(method, url, got.cause, spent + delay):
                self.stats.retries += 1
                await self.sleep(delay)  # a daemon: retry outside the budget until it answers
                spent += delay
                continue
            if spent + delay > self.retry.budget:
                raise RetriesExhaustedError(
                    f"gave up after {attempt} attempts in {spent:.1f}s; last: {got.cause}",
                    url=url,
                    hint="the upstream keeps failing; raise [upstream] retry_budget or try later",
                )
            self.stats.retries += 1
            self.log.debug(
                "upstream.retry",
                url=redact_url(url),
                cause=got.cause,
                attempt=attempt,
                wait=round(delay, 3),
            )
            await self.sleep(delay)
            spent += delay

    async def _attempt(
        self,
        method: str,
        url: str,
        params: Callable[[], Mapping[str, str]] | None,
        json: Any,
        headers: Mapping[str, str] | None,
        budget: RequestBudget | None,
        remaining: float,
        observe: Callable[[Response], None] | None = None,
    ) -> Attempt:
        """One attempt, no retry: an answer (any status), or the transient error in its place.
        Every attempt is a request the upstream sees: with a budget, its grant is also the
        place in flight (`RequestBudget.slot`), so it is sent as it is granted."""
        slot = budget.slot() if budget is not None else self.limit
        started: float | None = None
        try:
            async with slot:
                started = self.clock()
                # The last attempt may not outlive the budget either.
                timeout = aiohttp.ClientTimeout(
                    total=max(0.001, min(self.settings.timeout, remaining))
                )
                async with self.session.request(
                    method,
                    url,
                    params=dict(params()) if params else None,
                    json=json,
                    headers=headers,
                    timeout=timeout,
                ) as resp:
                    body = await resp.read()
                    cut_short(resp, body)
                    response = Response(resp.status, resp.headers, body, str(resp.url))
        except TRANSIENT_ERRORS as exc:
            name = type(exc).__name__
            self.stats.errors[name] += 1
            return Attempt(
                None,
                scrub(f"{name}: {exc}" if str(exc) else name),
                None,
                self._since(started),
                never_reached=isinstance(exc, UNREACHABLE_ERRORS) and not self.reached,
            )
        elapsed = self._since(started)
        self.stats.statuses[response.status] += 1
        self._answered()
        if observe is not None:
            # Before a Retry-After date is read: the `Date` beside it sets the upstream's clock.
            observe(response)
        wait = None
        if response.status == 429:
            wait = retry_after(response.headers.get("Retry-After"), self.upstream_now())
            if budget is not None:
                budget.on_throttled(wait)
        elif budget is not None:
            budget.on_answer()
        return Attempt(response, f"HTTP {response.status}", wait, elapsed)

    async def aclose(self) -> None:
        """Close the connections (the aiohttp session handed in)."""
        await self.session.close()

    def _since(self, started: float | None) -> float:
        return max(0.0, self.clock() - started) if started is not None else 0.0

    def _answered(self) -> None:
        """The upstream answered: from now on a refused connection is a transient fault."""
        if self.reached:
            return
        self.reached = True
        self.unreachable_reason = None
        if self._unreachable_logged_at is not None:
            self.log.info("upstream.reachable", hint="the upstream answers again")

    def _will_not_heal(self, method: str, url: str, cause: str, spent: float) -> bool:
        """Judge a failure to connect to an upstream that never answered, after `spent` s.

        Returns False while within the grace (retry as usual); raises `UnreachableError` in
        fail-fast mode once past it; in daemon mode logs the error (now and then) and returns
        True: the caller waits and retries without counting the budget.
        """
        if not self.unreachable and spent <= min(UNREACHABLE_GRACE, self.retry.budget):
            return False
        error = UnreachableError(
            f"cannot reach the upstream at {redact_url(url)} ({method}): {cause}",
            url=url,
            hint=f"check {self.settings.base_url_key}: the host, port and scheme, DNS, firewall and "
            "TLS certificate",
        )
        if self.settings.fail_fast:
            self.unreachable = True  # later requests give up at their first refusal
            raise error
        self.unreachable_reason = str(error)
        now = self.clock()
        last = self._unreachable_logged_at
        if last is None or now - last >= UNREACHABLE_REPEAT:
            self._unreachable_logged_at = now
            self.log.error(
                "upstream.unreachable",
                url=redact_url(url),
                error=cause,
                hint=f"{error.hint}; retrying until it answers",
            )
        return True
