"""`UpstreamClock`: "now" on the scale of the stamps the upstream serves, learned from those stamps.

The spec says stamps are ISO 8601 UTC; it ties them to no clock. A database whose stamps run
90 s behind the HTTP `Date` header is a legal upstream, and a cursor or a tombstone dated from
the `Date` clock would then sit in the stamps' future: polls would ask from a moment the stamps
have not reached, and a row created again under a deleted id would look older than its
tombstone. So "upstream now" is learned from the stamps themselves:

    offset = max(stamp - local time at receipt)      over every stamp served
    now()  = local time + offset

A stamp is never ahead of its own clock when it is served, and it is read after it was served,
so every term is at most the true offset: `now()` is a *lower bound* of now on the stamps'
scale. A late commit (a stamp served long after it was taken) only lowers a term, never raises
the estimate. A lower bound is the safe direction everywhere it is used: a cursor placed early
re-reads more; a confirmed deletion dated early lets more later copies through.

The estimate is a maximum over two rolling windows of a day (`WINDOW`), so an upstream that
sets its clock back is followed within two days instead of never. It is kept in `_sync_meta`
(`META_KEY`) so a restart keeps it. Before any stamp was ever served, `now()` is the `Date`
clock a day back (`FALLBACK_LAG`): an upstream with nothing stamped yet costs a day of re-read,
nothing else.

A stamp more than `FUTURE_SLACK` ahead of both the local and the `Date` clock is a row dated in
the future, not a reading of the stamps' clock, and teaches nothing. The `Date` header keeps the
signing skew (`sync.channel.signing`) and the calendar (the malls' hours' today, which a lower
bound of the stamps' now, far behind on an idle upstream, would date wrongly); `ceiling()` (the cap
that keeps a far-future stamp from carrying a cursor past now) is the latest of the three
clocks, so that neither a slow `Date` nor a slow local clock caps a cursor below real stamps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from sync.model.stamps import iso_ms, normalize_or_none

META_KEY = "upstream_clock"
#: Seconds behind the `Date` clock that `now()` answers before any stamp was observed.
FALLBACK_LAG = 86400.0
#: The length of one window of the rolling maximum, in seconds.
WINDOW = 86400.0
#: Seconds a stamp may lie ahead of both the local and the `Date` clock and still be learned
#: from; one further ahead is a row dated in the future (bad data, a scheduled value), not the
#: stamps' clock, and would carry "now" (and every cursor capped by it) into that future.
FUTURE_SLACK = 300.0
#: A learned offset is written to `_sync_meta` again once it moved by this many seconds.
PERSIST_STEP = 0.5


def stamp_seconds(stamp: str) -> float:
    """A normalised stamp (`YYYY-MM-DDTHH:MM:SS.sssZ`) as Unix time."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


class UpstreamClock:
    """The upstream's "now" on its stamps' scale (a lower bound); see the module docstring."""

    def __init__(
        self,
        *,
        local: Callable[[], float] = time.time,
        date_offset: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.local = local
        #: The `Date` header's offset (signing), for the fallback and the ceiling only.
        self.date_offset = date_offset
        #: The maxima of the current and the previous window (None: nothing seen in it).
        self._current: float | None = None
        self._previous: float | None = None
        self._window_start = local()
        self._put: Callable[[str, str], None] | None = None
        #: The stamp and receipt time of the largest term (the fast path of `observe`).
        self._top: tuple[str, float] | None = None
        self._persisted: float | None = None

    # -- learning ------------------------------------------------------------------------------

    @property
    def offset(self) -> float | None:
        """Seconds to add to local time to reach the stamps' scale (None: nothing seen yet)."""
        seen = [o for o in (self._current, self._previous) if o is not None]
        return max(seen) if seen else None

    def observe(self, stamp: str | None, received: float | None = None) -> None:
        """Learn from one normalised stamp served, read at local time `received` (default
        now; it must be taken *after* the answer arrived)."""
        if not stamp:
            return
        at = self.local() if received is None else received
        self._roll(at)
        if self._top is not None and stamp <= self._top[0] and at >= self._top[1]:
            return  # no newer than a stamp read earlier: cannot raise the offset (no parse)
        try:
            seconds = stamp_seconds(stamp)
        except ValueError:
            return
        term = seconds - at
        if term > max(0.0, self.date_offset()) + FUTURE_SLACK:
            return  # dated in the future: not a reading of the stamps' clock
        if self._current is None or term > self._current:
            self._current = term
            self._top = (stamp, at)
            self._save()

    def observe_resources(
        self, resources: Iterable[dict[str, object]], field: str, received: float
    ) -> None:
        """Learn from the largest `field` stamp of a page's resources (one parse a page)."""
        top: str | None = None
        for r in resources:
            attrs = r.get("attributes")
            if isinstance(attrs, dict):
                s = normalize_or_none(attrs.get(field))
                if s is not None and (top is None or s > top):
                    top = s
        self.observe(top, received)

    def _roll(self, at: float) -> None:
        if at - self._window_start >= WINDOW:
            # A whole window with nothing seen forgets both (two windows have passed).
            passed = at - self._window_start >= 2 * WINDOW
            self._previous = None if passed else self._current
            self._current = None
            self._top = None
            self._window_start = at

    # -- reading -------------------------------------------------------------------------------

    def at(self, local_ts: float) -> float:
        """The local moment `local_ts` on the stamps' scale (Unix seconds), a lower bound."""
        offset = self.offset
        if offset is None:
            return local_ts + self.date_offset() - FALLBACK_LAG
        return local_ts + offset

    def now_ts(self) -> float:
        """Now on the stamps' scale (a lower bound), in Unix seconds: what a lag is measured
        against (`sync.jobs.incremental.freshness`)."""
        return self.at(self.local())

    def now(self) -> str:
        """Now on the stamps' scale (a lower bound), in the API's format."""
        return iso_ms(self.now_ts())

    def date_ts(self, local_ts: float) -> float:
        """The local moment `local_ts` on the `Date` header's clock (Unix seconds): the
        calendar's (the malls' hours' today), never a stamp's."""
        return local_ts + self.date_offset()

    def ceiling(self) -> str:
        """The latest "now" any clock claims: the local clock, the `Date` clock, the stamps'.
        A cursor is capped here so a far-future stamp cannot carry it past every clock."""
        local = self.local()
        return iso_ms(max(local, local + self.date_offset(), self.at(local)))

    # -- kept in the mirror (`_sync_meta`) -----------------------------------------------------

    def keep(self, get: Callable[[str], str | None], put: Callable[[str, str], None]) -> None:
        """Restore what an earlier run learned from `get(META_KEY)`, and `put` every change."""
        self.load(get(META_KEY))
        self._put = put

    def dump(self) -> str:
        def text(v: float | None) -> str:
            return "" if v is None else f"{v:.3f}"

        return f"{self._window_start:.3f}:{text(self._current)}:{text(self._previous)}"

    def load(self, text: str | None) -> None:
        """Restore a dumped state (never raises on a damaged value); a state learned earlier
        in this process wins where it is larger."""
        if not text:
            return
        parts = text.split(":")
        if len(parts) != 3:
            return
        try:
            start = float(parts[0])
            current = float(parts[1]) if parts[1] else None
            previous = float(parts[2]) if parts[2] else None
        except ValueError:
            return
        here = self.offset
        self._window_start, self._current, self._previous = start, current, previous
        self._roll(self.local())
        if here is not None and (self._current is None or here > self._current):
            self._current = here
        self._persisted = self.offset

    def _save(self) -> None:
        offset = self.offset
        if self._put is None or offset is None:
            return
        if self._persisted is None or abs(offset - self._persisted) >= PERSIST_STEP:
            self._persisted = offset
            self._put(META_KEY, self.dump())

    def flush(self) -> None:
        """Write the learned state now, whatever moved (end of a job)."""
        if self._put is not None and self.offset is not None:
            self._persisted = self.offset
            self._put(META_KEY, self.dump())
