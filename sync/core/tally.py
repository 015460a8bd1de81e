"""What one daemon job run did: the upstream requests it sent and the figures of its work.

The daemon logs one summary line per job run (`job.done`, `sync.daemon.runs`); the figures on it
come from here. A run opens a `Tally` for its task (`counting`); the client counts every answer
it reads (`request`) and the job bodies add what they did (`note`: rows polled, deletions
applied, rows verified...). A context variable, not a shared counter: the jobs, the queue
worker and the webhook receiver run side by side on one client, and each run counts only its
own requests (tasks it starts inherit its tally).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Tally:
    """One run's requests and figures."""

    requests: int = 0
    did: Counter[str] = field(default_factory=Counter)


_current: ContextVar[Tally | None] = ContextVar("sync_job_tally", default=None)


@contextlib.contextmanager
def counting() -> Iterator[Tally]:
    """Count this task's requests and notes (and its child tasks') into a new tally."""
    tally = Tally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


def request() -> None:
    """An upstream answer was read (by the current run, if one is counting)."""
    tally = _current.get()
    if tally is not None:
        tally.requests += 1


def note(**figures: int) -> None:
    """Add `figures` (rows=3, deletions=1) to the current run's summary line."""
    tally = _current.get()
    if tally is not None:
        tally.did.update({k: v for k, v in figures.items() if v})
