"""Freshness from the data: the time from a change upstream (its stamp) to its commit here.

A stamp is on the upstream's clock, so the lag is measured against the upstream's now, never
the local one: the client's `UpstreamClock` (`client.clock.now_ts()`, a lower bound, so a lag is
never overstated by a `Date` clock that runs ahead of the stamps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from sync.model.stamps import normalize_or_none

#: The paths a change reaches the mirror by (`sync_change_lag_seconds{path}`).
PATHS = ("notice", "poll", "proof")
#: Told (type, path, lags in seconds) of the changes a path committed (the daemon observes
#: them in `sync_change_lag_seconds` and keeps a summary for `ccsync status`).
OnLag = Callable[[str, str, Sequence[float]], None]


def lags(stamps: Iterable[str | None], now: float) -> list[float]:
    """Seconds from each readable stamp to `now` (never negative: a stamp ahead of the
    estimate is the estimate's error, not a change from the future)."""
    out: list[float] = []
    for stamp in stamps:
        text = normalize_or_none(stamp)
        if text is None:
            continue
        at = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
        out.append(max(0.0, now - at))
    return out


def changed_lags(
    before: Mapping[int, str | None], after: Mapping[int, str | None], now: float
) -> list[float]:
    """Lags of the rows whose stamp a write changed (`before` and `after` it): a copy equal
    to the mirror's (a duplicate notice, a poll's overlap) is no change and no lag."""
    return lags((s for i, s in after.items() if s is not None and s != before.get(i)), now)


def new_versions(before: Mapping[int, str | None], after: Mapping[int, str | None]) -> int:
    """How many rows a write gave a stamp the mirror did not hold (`before` and `after` it):
    what a poll "changed", never what it was served (its lookback serves rows again)."""
    return sum(1 for i, s in after.items() if s is not None and s != before.get(i))
