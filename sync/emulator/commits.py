"""When a change is stamped and when it is seen: the emulator's readings of time the spec leaves open.

The spec says stamps are ISO 8601 UTC and nothing more: not which clock takes them, not that a
change is visible the moment it is stamped, not how equal stamps are ordered. Three hard
readings (`sync.emulator.hard.Hard`) serve the other legal answers:

- `stamps_behind_date`: the data's stamps are taken `STAMP_LAG` seconds behind the clock of the
  HTTP `Date` header and of the signature check (a database clock behind its web servers').
- `late_commits`: a share (`LATE_SHARE`) of random updates is stamped when it starts and becomes
  visible (listings, `filter[id]`, its notice) only `LATE_LAGS` seconds later, as a long
  transaction commits, while later stamps are visible at once (`LateCommits`).
- `unstable_ties`: rows sharing the stamp a listing is sorted by come in another order for every
  request (SQL `ORDER BY updated_at LIMIT/OFFSET` with no tiebreaker: `shuffle_ties`), and random
  changes sometimes bulk-update `BULK_ROWS` rows of one type under one stamp.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Seconds the data's stamps run behind the `Date` clock under `stamps_behind_date`.
STAMP_LAG = 90.0
#: Seconds after its stamp a late commit becomes visible (one of them, drawn).
LATE_LAGS = (20.0, 60.0)
#: Share of random updates that commit late under `late_commits`.
LATE_SHARE = 0.2
#: Share of random operations that bulk-update a run under `unstable_ties`, its rows (more than
#: two of the strict profile's pages, nearly one of the spec's 100; all of a smaller type's) and
#: the fewest a type must hold for one (more than a strict page).
BULK_SHARE = 0.02
BULK_ROWS = 75
BULK_MIN = 35


@dataclass
class Pending:
    """A change stamped, not yet visible."""

    visible_at: float  # on the clock of the `Date` header
    stamp: str
    attrs: dict[str, Any] = field(default_factory=dict)


class LateCommits:
    """The changes of `late_commits` waiting to become visible, keyed by (type, id)."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, int], Pending] = {}

    def hold(self, type_name: str, rid: int, change: Pending) -> None:
        self.pending[(type_name, rid)] = change

    def due(self, now: float) -> list[tuple[tuple[str, int], Pending]]:
        """The changes visible by `now`, taken out, oldest stamp first."""
        if not self.pending:
            return []
        ready = sorted(
            ((k, p) for k, p in self.pending.items() if p.visible_at <= now),
            key=lambda kp: kp[1].stamp,
        )
        for key, _ in ready:
            del self.pending[key]
        return ready

    def take(self, type_name: str, rid: int) -> Pending | None:
        """The row's pending change, taken out (it must be visible before the row changes
        again: a transaction on the same row waits for the first to commit)."""
        return self.pending.pop((type_name, rid), None)


def shuffle_ties(
    ids: list[int], start: int, size: int, value: Callable[[int], Any], rng: random.Random
) -> list[int]:
    """Rows `start`..`start + size` of `ids` (sorted by `value`), each run of equal values that
    the window touches put in a random order first, as a new query plan would."""
    if not ids or start >= len(ids):
        return []
    end = min(len(ids), start + size)
    lo, hi = start, end
    first, last = value(ids[start]), value(ids[end - 1])
    while lo > 0 and value(ids[lo - 1]) == first:
        lo -= 1
    while hi < len(ids) and value(ids[hi]) == last:
        hi += 1
    segment = ids[lo:hi]
    out: list[int] = []
    run: list[int] = []
    for rid in segment:
        if run and value(run[0]) != value(rid):
            rng.shuffle(run)
            out += run
            run = []
        run.append(rid)
    rng.shuffle(run)
    out += run
    return out[start - lo : end - lo]


def bulk_stamp(stamps: Sequence[str | None]) -> str | None:
    """The newest of the rows' current stamps: one stamp after it is the run's."""
    present = [s for s in stamps if s]
    return max(present) if present else None
