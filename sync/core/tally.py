"""What one daemon job run did: the upstream requests it sent and the figures of its work.

The daemon logs one summary line per job run (`job.done`, `sync.daemon.runs`); the figures on it
come from here. A run opens a `Tally` for its task (`counting`); the client counts every answer
it reads (`request`) and the job bodies add what they did (`note`: rows polled, deletions
applied, rows verified...). A context variable, not a shared counter: the jobs, the queue
worker and the webhook receiver run side by side on one client, and each run counts only its
own requests (tasks it starts inherit its tally). Runs too small and many for a line each (a
webhook batch) are summed into one line per interval (`Summary`).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass, field


@dataclass
class Tally:
    """One run's requests and figures; a run inside another (the daemon's first backfill inside
    its job, a queue worker batch) counts into both: `parent` is the run it is part of."""

    requests: int = 0
    did: Counter[str] = field(default_factory=Counter)
    parent: Tally | None = field(default=None, repr=False)


_current: ContextVar[Tally | None] = ContextVar("sync_job_tally", default=None)


def start() -> tuple[Tally, Token[Tally | None]]:
    """Open a tally for this task (and its child tasks), inside the current one if any; give
    the token to `stop`. `counting` is the same as a `with` block."""
    tally = Tally(parent=_current.get())
    return tally, _current.set(tally)


def stop(token: Token[Tally | None]) -> None:
    """Close the tally `start` opened (its counts stay in it, and in its parents)."""
    _current.reset(token)


@contextlib.contextmanager
def counting() -> Iterator[Tally]:
    """Count this task's requests and notes (and its child tasks') into a new tally."""
    tally, token = start()
    try:
        yield tally
    finally:
        stop(token)


def request() -> None:
    """An upstream answer was read (by the current run and the runs it is part of)."""
    tally = _current.get()
    while tally is not None:
        tally.requests += 1
        tally = tally.parent


def note(**figures: int) -> None:
    """Add `figures` (rows=3, deletions=1) to the current run's summary line (and its
    parents')."""
    tally = _current.get()
    did = {k: v for k, v in figures.items() if v}
    while tally is not None:
        tally.did.update(did)
        tally = tally.parent


class Summary:
    """The figures of many small runs summed into one log line per `every` seconds, per key:
    the queue worker applies a webhook batch per notice or two, and one line each at 2 changes
    a second was 120 lines a minute at `info`. `add` each run's figures; `take` hands the sums
    once `every` seconds passed since the last (the first at once), or now with `force`."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._taken = -math.inf
        self._sums: dict[str, Counter[str]] = {}

    def add(self, key: str, **figures: int) -> None:
        self._sums.setdefault(key, Counter()).update(figures)

    def take(self, *, force: bool = False) -> dict[str, dict[str, int]] | None:
        """The sums per key since the last take, when due (None: nothing, or not yet)."""
        now = self._clock()
        if not self._sums or not (force or now - self._taken >= self.every):
            return None
        sums, self._sums, self._taken = self._sums, {}, now
        return {key: dict(figures) for key, figures in sorted(sums.items())}
