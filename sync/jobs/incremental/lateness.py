"""Lateness of commits, measured, and the polls' lookback that adapts to it.

A change stamped T may become visible long after T (a long transaction; an asynchronous feed
writer) while later stamps are visible at once: the spec promises no commit order. A poll that
re-read a fixed few seconds behind its cursor would never see such a row. So each poll measures
lateness and each type (and the deletions feed) keeps its own lookback:

- **Late arrival**: a row served stamped before the cursor the poll started from (the largest
  stamp an earlier complete walk was served) that the mirror did not hold at that stamp (for the
  feed: an entry whose row is still mirrored no newer than the entry). Its lateness is how far
  behind that cursor its stamp lies.
- **Lookback**: starts at `[schedule] poll_overlap`; grows at once to `MARGIN` times the largest
  lateness seen; decays back toward `poll_overlap` with a half-life of `HALF_LIFE` seconds; never
  exceeds `[schedule] poll_lookback_max` (the ceiling).
- **Deep re-read**: every `DEEP_EVERY`-th poll of a scope reads from cursor - ceiling, so lateness
  not seen yet (nothing late arrived, the lookback is small) is still covered: a change that
  commits up to the ceiling late reaches the mirror within `DEEP_EVERY` polls of becoming visible.

The state per type (lookback, late arrivals counted, the largest lateness, when it was last
seen) is kept in `_sync_meta` (`META_KEY`), so a restart keeps it and `ccsync status` shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import orjson

from sync.model.stamps import iso_ms

META_KEY = "poll_lateness"
#: The lookback grows to this many times the lateness seen.
MARGIN = 1.5
#: Seconds in which the part of the lookback above `poll_overlap` halves.
HALF_LIFE = 3600.0
#: Every this many polls of a scope, one reads from cursor - ceiling.
DEEP_EVERY = 3


@dataclass
class Lateness:
    """One type's (or the feed's) lateness record."""

    lookback: float
    late: int = 0  # late arrivals counted, in all
    largest: float = 0.0  # the largest lateness seen, seconds
    last_late_at: str | None = None  # local time of the last late arrival (API format)
    at: float = 0.0  # local Unix time `lookback` was last set (its decay starts there)
    floor: float = 0.0  # `poll_overlap` when it was set: what the lookback decays toward

    def now(self, at: float, ceiling: float | None = None) -> float:
        """The lookback decayed to local time `at`."""
        above = max(0.0, self.lookback - self.floor)
        value = self.floor + above * 0.5 ** (max(0.0, at - self.at) / HALF_LIFE)
        return float(value if ceiling is None else min(ceiling, value))


class Lookbacks:
    """The lookback of every polled type and of the feed; see the module docstring."""

    def __init__(
        self,
        get: Callable[[str], str | None],
        put: Callable[[str, str], None],
        *,
        overlap: float,
        ceiling: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.overlap = overlap
        self.ceiling = max(ceiling, overlap)
        self.clock = clock
        self._put = put
        self.state: dict[str, Lateness] = {}
        self._polls: dict[tuple[str, str], int] = {}
        try:
            saved = orjson.loads(get(META_KEY) or "{}")
        except orjson.JSONDecodeError:
            saved = {}
        if isinstance(saved, dict):
            for key, value in saved.items():
                try:
                    self.state[key] = Lateness(**value)
                except TypeError:
                    continue

    def of(self, key: str) -> Lateness:
        rec = self.state.get(key)
        if rec is None:
            rec = self.state[key] = Lateness(self.overlap, at=self.clock(), floor=self.overlap)
            self.save()  # so `ccsync status` shows every polled type
        rec.floor = self.overlap  # the configured floor now, whatever was kept
        return rec

    def lookback(self, key: str) -> float:
        """The current lookback of `key`, decayed to now, within [overlap, ceiling]."""
        return max(self.overlap, self.of(key).now(self.clock(), self.ceiling))

    def behind(self, key: str, scope: str) -> float:
        """Seconds this poll of (`key`, `scope`) reads behind its cursor: the lookback, or the
        ceiling on every `DEEP_EVERY`-th poll of the scope (the deep re-read)."""
        n = self._polls.get((key, scope), 0) + 1
        self._polls[(key, scope)] = n
        if n % DEEP_EVERY == 0:
            return self.ceiling
        return self.lookback(key)

    def saw(self, key: str, lateness: list[float]) -> None:
        """Late arrivals of one poll (their lateness in seconds): counted, the lookback grown."""
        if not lateness:
            return
        rec = self.of(key)
        now = self.clock()
        worst = max(lateness)
        rec.lookback = min(self.ceiling, max(self.lookback(key), MARGIN * worst))
        rec.at = now
        rec.late += len(lateness)
        rec.largest = max(rec.largest, worst)
        rec.last_late_at = iso_ms(now)
        self.save()

    def save(self) -> None:
        self._put(META_KEY, orjson.dumps({k: asdict(v) for k, v in self.state.items()}).decode())


def shown(text: str | None, at: float) -> dict[str, dict[str, float | int | str | None]]:
    """The recorded lateness per type as `ccsync status` shows it, the lookback decayed to
    local time `at`."""
    try:
        saved = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    out: dict[str, dict[str, float | int | str | None]] = {}
    for k, v in saved.items() if isinstance(saved, dict) else ():
        try:
            rec = Lateness(**v)
        except TypeError:
            continue
        out[str(k)] = {
            "lookback_s": round(rec.now(at), 1),
            "late": rec.late,
            "largest_s": round(rec.largest, 1),
            "last_late_at": rec.last_late_at,
        }
    return out
