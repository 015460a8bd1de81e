"""What the emulator shows later than it happened: late feed entries, rows a "current" list drops.

Two hard readings of time (`sync.emulator.hard`, #37):

- `late_feed_entries`: a deletion's feed entry is listed only `0..LATE_FEED_SECONDS` after its
  `created_at` (an asynchronous feed writer), so entries appear out of their stamp order.
- `current_lists_drop`: a mall's press releases and programs are "current" lists; one may drop
  a row for a while (out of every mall route, `/malls?include=` linkage and `filter[id]`, no
  feed entry, no notice) and list it again with its old stamp.

`Late.due` runs before each request is served (`Listings`): what is due (or everything, once
its switch is off) becomes visible, and the type's version moves so no cached page hides it.
"""

from __future__ import annotations

import random
from typing import Protocol

from sync.emulator.hard import LATE_FEED_SECONDS, Hard
from sync.emulator.records import Rec


class Dataset(Protocol):
    """What `Late` reads and moves of the emulator's data (`sync.emulator.dataset.Dataset`)."""

    hard: Hard
    hard_rng: random.Random
    version: dict[str, int]

    def now(self) -> float: ...

    def add(self, rec: Rec) -> None: ...


class Late:
    """Feed entries not listed yet, and rows hidden for now, with the moment each shows."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Rec]] = []  # (listed at, entry)
        self.hidden: dict[tuple[str, int], float] = {}  # (type, id) -> listed again at
        self._by_type: dict[str, frozenset[int]] = {}

    def publish(self, data: Dataset, entry: Rec) -> None:
        """A new feed entry: listed now, or later under `late_feed_entries`."""
        if not data.hard.late_feed_entries:
            data.add(entry)
            return
        self.pending.append((data.now() + data.hard_rng.uniform(0, LATE_FEED_SECONDS), entry))

    def hide(self, data: Dataset, type_name: str, rid: int, seconds: float) -> None:
        self.hidden[(type_name, rid)] = data.now() + seconds
        self._changed(data, type_name)

    def visible(self, type_name: str, ids: list[int]) -> list[int]:
        """`ids` without the rows of `type_name` hidden now."""
        gone = self._by_type.get(type_name)
        if gone is None:
            gone = self._by_type[type_name] = frozenset(
                i for (t, i) in self.hidden if t == type_name
            )
        return [i for i in ids if i not in gone] if gone else ids

    def due(self, data: Dataset) -> None:
        now = data.now()
        if self.pending:
            late = data.hard.late_feed_entries
            ready = [e for at, e in self.pending if at <= now or not late]
            if ready:
                self.pending = [(at, e) for at, e in self.pending if at > now and late]
                for entry in ready:
                    data.add(entry)
        if self.hidden:
            drop = data.hard.current_lists_drop
            back = [k for k, at in self.hidden.items() if at <= now or not drop]
            for key in back:
                del self.hidden[key]
            for type_name in {t for t, _ in back}:
                self._changed(data, type_name)

    def _changed(self, data: Dataset, type_name: str) -> None:
        self._by_type.pop(type_name, None)
        data.version[type_name] += 1
        data.version["malls"] += 1  # a mall's members (and `include=` linkage) change
