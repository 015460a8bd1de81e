"""The request budget: how many requests per second `sync` may start against the upstream.

A legacy API with unknown rate limits must not be hammered around the clock, so every request
of every job and of the queue worker takes a slot from one `RequestBudget` first:

- **Never exceeded**: at most `floor(rate)` requests start in any sliding 1-second window.
- **Smooth**: a token bucket holding `burst` = a tenth of the rate (at least 1; 2 at 20/s)
  refills at `rate`, so starts are spread over the second (~`1 / rate` apart once the small
  burst is spent) instead of `rate` at once and then a pause. An upstream counting requests per
  clock second sees about `rate`, not two bursts from neighbouring windows landing in one of
  its seconds when the network delays some. Below one per second, starts are `1 / rate` apart.
- **In flight**: with `concurrency`, a grant is also a place among at most that many requests
  in flight (`slot()` holds it until the answer is read). Both are granted together, so a
  request is sent the moment it is granted: granted first and then queued for a connection,
  requests would leave bunched, and an upstream counting per second would see more than the
  rate (the first `bench/upstream_cost.py` run measured 21 at 20/s that way).
- **Priorities**: waiting requests are granted in priority order, oldest first within one:
  webhook-driven fetches first (a change someone is waiting for), then polls and the deletions
  feed, then reconcile and verify, then hours, and last the rolling proof (it takes the slots
  no other request waits for, so it seldom delays notices, polls or the feed). The proof keeps
  a share nothing can starve it of: after `PROOF_EVERY` grants to others, a waiting proof
  request goes first (the proof is what repairs what every other path missed; a poll that
  spends the whole budget must not stop it). A job sets its priority for everything it
  sends with `priority(...)` (a context variable, so no call in between needs to know).
- **Adaptive** (AIMD, as TCP does): a 429 halves the rate (down to `MIN_RATE`) and holds every
  grant until its `Retry-After` has passed; each second of answers without a 429 then adds back
  a twentieth of the configured rate, so a throttled daemon returns to its budget in ~20 s.

`clock` and `sleep` are injected so tests run on a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from enum import IntEnum
from typing import Any


class Priority(IntEnum):
    """Lower goes first."""

    WEBHOOK = 0
    POLL = 1
    RECONCILE = 2
    HOURS = 3
    #: The rolling proof (`sync.jobs.proving.proof`): only what no one else waits for.
    PROOF = 4


#: The priority of the requests the current task sends (set by `priority`).
current_priority: ContextVar[Priority] = ContextVar("sync_request_priority", default=Priority.POLL)

#: The lowest rate a run of 429s can bring the budget to (one request every 5 s).
MIN_RATE = 0.2
#: The sliding window, a hair over 1 s (see `_delay`).
WINDOW = 1.0 + 1e-6
#: Each second without a 429 adds back this share of the configured rate.
RECOVERY_SHARE = 0.05
#: A waiting proof request goes first after this many grants to others (its share: 1/20 of
#: the budget while others keep it busy; the proof needs ~1.4 % at 200k rows, docs/cost.md).
PROOF_EVERY = 20


@contextlib.contextmanager
def priority(level: Priority) -> Iterator[None]:
    """Send the requests made inside the block (in this task and those it starts) at `level`."""
    token = current_priority.set(level)
    try:
        yield
    finally:
        current_priority.reset(token)


class RequestBudget:
    """A sliding-window limiter with priorities and AIMD; see the module docstring."""

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        on_grant: Callable[[float, Priority], None] | None = None,
        concurrency: int | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError("a request budget needs a positive rate")
        self.max_rate = rate
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.on_grant = on_grant  # (time, priority) of every grant: for tests and benches
        self.concurrency = concurrency  # requests in flight at most (None: no bound)
        self.in_flight = 0
        self._freed = asyncio.Event()  # set when a request in flight ends
        self.starts: deque[float] = deque()  # start times within the last second
        self.tokens = self.burst  # the token bucket (smoothness), full at start
        self._tokens_at = clock()
        self.hold_until = 0.0  # no grant before this (a 429's Retry-After)
        self._last_change = clock()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._pump: asyncio.Task[None] | None = None
        self.granted = 0
        self._since_proof = 0  # grants to others since the last proof grant (`PROOF_EVERY`)
        self.throttled = 0  # 429s seen
        self.waited = 0.0  # seconds requests spent waiting for a slot, summed

    # -- granting ----------------------------------------------------------------------------

    @property
    def burst(self) -> float:
        """The token bucket's size: a tenth of the current rate, at least one request."""
        return float(max(1, math.ceil(self.rate / 10)))

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self._tokens_at) * self.rate)
        self._tokens_at = now

    def _delay(self, now: float) -> float:
        """Seconds until one more request may start (0 when it may start now)."""
        # A start leaves the window a microsecond after it is 1 s old: float sums of paced
        # starts land a last bit either side of "exactly 1 s", and either must count as inside.
        while self.starts and self.starts[0] < now - WINDOW:
            self.starts.popleft()
        wait = max(0.0, self.hold_until - now)
        per_window = max(1, math.floor(self.rate))
        if len(self.starts) >= per_window:
            wait = max(wait, self.starts[0] + WINDOW - now)
        self._refill(now)
        if self.tokens < 1.0 - 1e-9:  # (a float's last bit must not stall a fake clock)
            wait = max(wait, (1.0 - self.tokens) / self.rate)
        return wait

    def _slot_free(self) -> bool:
        return self.concurrency is None or self.in_flight < self.concurrency

    def _start(self, now: float, level: Priority) -> None:
        self.in_flight += 1
        self.starts.append(now)
        self._refill(now)
        self.tokens -= 1.0
        self.granted += 1
        self._since_proof = 0 if level is Priority.PROOF else self._since_proof + 1
        if self.on_grant is not None:
            self.on_grant(now, level)

    async def acquire(self, level: Priority | None = None) -> None:
        """Wait for a slot at `level` (default: the task's `current_priority`)."""
        level = current_priority.get() if level is None else level
        now = self.clock()
        if not self._waiters and self._slot_free() and self._delay(now) == 0.0:
            self._start(now, level)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(level), next(self._seq), fut))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._grant_in_order())
        t0 = self.clock()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, then cancelled before it could send
            raise
        finally:
            self.waited += self.clock() - t0

    def release(self) -> None:
        """A request granted by `acquire` is over (its answer read, or it failed)."""
        self.in_flight = max(0, self.in_flight - 1)
        self._freed.set()

    @contextlib.asynccontextmanager
    async def slot(self, level: Priority | None = None) -> AsyncIterator[None]:
        """Hold a grant (a start of the rate and a place in flight) while the block sends
        one request and reads its answer."""
        await self.acquire(level)
        try:
            yield
        finally:
            self.release()

    async def _grant_in_order(self) -> None:
        while self._waiters:
            if not self._slot_free():
                self._freed.clear()
                await self._freed.wait()
                continue
            now = self.clock()
            delay = self._delay(now)
            if delay > 0:
                await self.sleep(delay)
                continue
            level, _, fut = self._next()
            if fut.done():  # its request was cancelled while waiting
                continue
            self._start(now, Priority(level))
            fut.set_result(None)

    def _next(self) -> tuple[int, int, asyncio.Future[None]]:
        """The waiter to grant: the first in priority order, or the oldest proof request once
        others had `PROOF_EVERY` grants since the proof's last (its share)."""
        if self._since_proof >= PROOF_EVERY and self._waiters[0][0] != Priority.PROOF:
            proof = [w for w in self._waiters if w[0] == Priority.PROOF and not w[2].done()]
            if proof:
                oldest = min(proof, key=lambda w: w[1])
                self._waiters.remove(oldest)
                heapq.heapify(self._waiters)
                return oldest
        return heapq.heappop(self._waiters)

    # -- adapting ----------------------------------------------------------------------------

    def on_throttled(self, retry_after: float | None) -> None:
        """A 429: halve the rate, and grant nothing before `retry_after` seconds from now."""
        now = self.clock()
        self.throttled += 1
        self.rate = max(MIN_RATE, self.rate / 2)
        self._last_change = now
        if retry_after:
            self.hold_until = max(self.hold_until, now + retry_after)

    def on_answer(self) -> None:
        """Any answer but a 429: grow back towards the configured rate, once a second."""
        if self.rate >= self.max_rate:
            return
        now = self.clock()
        if now - self._last_change >= 1.0:
            self.rate = min(self.max_rate, self.rate + self.max_rate * RECOVERY_SHARE)
            self._last_change = now

    def snapshot(self) -> dict[str, float | int]:
        """For `ccsync status` and /metrics."""
        return {
            "max_rate": self.max_rate,
            "rate": round(self.rate, 3),
            "waiting": sum(1 for *_, f in self._waiters if not f.done()),
            "in_flight": self.in_flight,
            "granted": self.granted,
            "throttled": self.throttled,
            "waited_s": round(self.waited, 3),
        }

    async def close(self) -> None:
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
