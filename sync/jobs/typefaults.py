"""Faults stay in their type: per-type failures, their backoff, and their report.

A route that answers badly (an HTML error page with status 200, a body cut short, a `data`
object instead of a list, bytes that are not UTF-8, retries spent) fails the work of its own
type only. The queue worker and the poll job record each failure here; the type then waits out
an exponential backoff (`base` seconds doubling per failure in a row, at most `cap`) before its
next attempt, while every other type goes on. One success ends it. `ccsync status` shows each
type's last error (whoever met the failure, the queue worker or a daemon job, records it in the
mirror through `record_type`, the one writer of a type's outcome), `/healthz` lists the failing
types, and `sync_type_errors_total{type}` / `sync_type_failures{type}` count them. A type the
account may not read (403) is no fault: it is skipped, recorded with `skipped_line`'s words.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sync.core.errors import ForbiddenError
from sync.model.stamps import iso_ms
from sync.store import MirrorStore

if TYPE_CHECKING:  # the metrics module loads prometheus_client: the daemon's only
    from sync.core.metrics import Metrics

#: The first retry of a failing type waits this long; each failure in a row doubles it.
BASE_BACKOFF = 2.0
#: The longest a failing type waits between attempts.
MAX_BACKOFF = 120.0


def skipped_line(exc: ForbiddenError) -> str:
    """How a type the account may not read is reported (`ccsync status`, a backfill's report)."""
    return f"not readable by this account (403); skipped: {exc.message}"


def record_type(
    mirror: MirrorStore, type_name: str, outcome: Exception | str | None, *, at: float
) -> str | None:
    """Record in the mirror how type `type_name` ended at `at` (epoch seconds): synced when
    `outcome` is None, else its last error (an exception's text, a 403 as `skipped_line`, or
    the line given). Returns the error line recorded, None for a success."""
    if outcome is None:
        mirror.types.record(type_name, ok=True, at=iso_ms(at))
        return None
    error = skipped_line(outcome) if isinstance(outcome, ForbiddenError) else str(outcome)
    mirror.types.record(type_name, ok=False, error=error, at=iso_ms(at))
    return error


@dataclass
class TypeFault:
    """A type failing now: how often in a row, the last error, when it may try again."""

    failures: int
    error: str
    retry_at: float


class TypeFaults:
    """Per-type failures and backoff, shared by the queue worker and the daemon's jobs."""

    def __init__(
        self,
        *,
        metrics: Metrics | None = None,
        base: float = BASE_BACKOFF,
        cap: float = MAX_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.base = base
        self.cap = cap
        self.clock = clock
        self.failing: dict[str, TypeFault] = {}

    def failed(self, name: str, error: str) -> float:
        """Record a failure of type `name`; the seconds until its next attempt."""
        fault = self.failing.get(name)
        failures = 1 if fault is None else fault.failures + 1
        delay = min(self.cap, self.base * 2.0 ** (failures - 1))
        self.failing[name] = TypeFault(failures, error, self.clock() + delay)
        if self.metrics is not None:
            self.metrics.type_errors.labels(type=name).inc()
            self.metrics.type_failures.labels(type=name).set(failures)
        return delay

    def succeeded(self, name: str) -> bool:
        """Type `name` worked: its backoff ends. True if it had been failing."""
        if self.failing.pop(name, None) is None:
            return False
        if self.metrics is not None:
            self.metrics.type_failures.labels(type=name).set(0)
        return True

    def due(self, name: str) -> bool:
        """Whether type `name` may be tried now (not failing, or its backoff is over)."""
        fault = self.failing.get(name)
        return fault is None or self.clock() >= fault.retry_at

    def next_due(self) -> float | None:
        """Seconds until the first failing type may be tried again; None when none is failing."""
        if not self.failing:
            return None
        return max(0.0, min(f.retry_at for f in self.failing.values()) - self.clock())

    def problems(self) -> list[str]:
        """One line per failing type, for `/healthz`."""
        now = self.clock()
        return [
            f"{name} failing ({f.failures} in a row, next try in "
            f"{max(0.0, f.retry_at - now):.0f} s): {f.error}"
            for name, f in sorted(self.failing.items())
        ]
