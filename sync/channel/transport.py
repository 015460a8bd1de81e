"""The retrying transport: one HTTP exchange, repeated through transient failures.

Retried: 5xx, 429 (waiting `Retry-After`, seconds or an HTTP date), timeouts and dropped
connections, with exponential backoff and full jitter capped at `max_backoff`. The whole request
is bounded by `retry_budget` seconds, after which `RetriesExhaustedError` names the last cause.
A semaphore shared by every job bounds the requests in flight. `sleep` and `clock` are injected
so tests run instantly.
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

from sync.errors import RetriesExhaustedError, redact_url
from sync.logs import get_logger

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class Stats:
    """Counters for metrics and tests."""

    statuses: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    relogins: int = 0
    errors: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


class Transport:
    """Sends requests through `session` with retries; see the module docstring."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        concurrency: int,
        timeout: float,
        retry_budget: float,
        max_backoff: float,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        on_response: Callable[[Response], None] | None = None,
    ) -> None:
        self.session = session
        self.limit = asyncio.Semaphore(concurrency)
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.retry_budget = retry_budget
        self.max_backoff = max_backoff
        self.sleep = sleep
        self.clock = clock
        self.wall = wall
        self.on_response = on_response
        self.stats = Stats()
        self.rng = random.Random()
        self.log = get_logger("sync.channel")

    async def send(
        self,
        method: str,
        url: str,
        *,
        params: Callable[[], Mapping[str, str]] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """One logical request; `params` is called per attempt (signatures expire)."""
        start = self.clock()
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            cause: str
            try:
                async with (
                    self.limit,
                    self.session.request(
                        method,
                        url,
                        params=dict(params()) if params else None,
                        json=json,
                        headers=headers,
                        timeout=self.timeout,
                    ) as resp,
                ):
                    body = await resp.read()
                    response = Response(resp.status, resp.headers, body, str(resp.url))
                self.stats.statuses[response.status] += 1
                if self.on_response:
                    self.on_response(response)
                if response.status not in RETRY_STATUSES:
                    return response
                cause = f"HTTP {response.status}"
                if response.status == 429:
                    wait = retry_after(response.headers.get("Retry-After"), self.wall())
            except (TimeoutError, aiohttp.ClientError) as exc:
                cause = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self.stats.errors[type(exc).__name__] += 1
            backoff = self.rng.uniform(0, min(self.max_backoff, 0.1 * 2**attempt))
            delay = max(wait, backoff) if wait is not None else backoff
            elapsed = self.clock() - start
            if elapsed + delay > self.retry_budget:
                raise RetriesExhaustedError(
                    f"gave up after {attempt} attempts in {elapsed:.1f}s; last: {redact_url(cause)}",
                    url=url,
                    hint="the upstream keeps failing; raise [upstream] retry_budget or try later",
                )
            self.stats.retries += 1
            self.log.debug(
                "request.retry", url=url, cause=cause, attempt=attempt, wait=round(delay, 3)
            )
            await self.sleep(delay)
