"""The malls' opening hours: each mall's hours for a window of days ahead, and its current hours.

One job for the backfill (beside its pages, whose small requests fill the gaps between them)
and for the daemon's `hours` schedule. Hours are not a JSON:API listing: they are asked per mall
and replace what the mirror held for that mall in the window (`Mirror.hours.write`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from sync.channel.clock import UpstreamClock
from sync.core.errors import ForbiddenError, NotFoundError
from sync.core.logs import get_logger
from sync.jobs.fanout import bounded
from sync.pipeline.hours import stage_hours
from sync.store import MirrorStore


class HoursAsked(Protocol):
    """What `MallHours` asks of the upstream client (`ChannelClient`, or a test's fake)."""

    clock: UpstreamClock

    async def hours(self, mall_id: int, start: date, end: date) -> list[dict[str, Any]]: ...

    async def current_hours(self, mall_id: int) -> Any: ...


class MallHours:
    """Refreshes the hours of malls from the upstream into the mirror."""

    def __init__(
        self, client: HoursAsked, mirror: MirrorStore, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.clock = clock
        # The events kept the backfill's logger and names, which operators already match on.
        self.log = get_logger("sync.backfill")

    def window(self, days: int) -> tuple[date, date]:
        """Every time zone's today and `days` on: from the day before the UTC date (on the
        upstream's `Date` clock, `UpstreamClock.date_ts`) to `days` after it.

        The spec gives a mall no time zone, so its "today" may be any date the Earth is on: a mall
        west of UTC is still on the UTC date - 1 from late afternoon (its time) on, and one east of
        UTC is on the UTC date at most (UTC+14 reaches date + 1 only near midnight UTC, inside the
        window anyway). The store replaces exactly this window (`Mirror.hours.write`).
        """
        today = datetime.fromtimestamp(self.client.clock.date_ts(self.clock()), tz=UTC).date()
        return today - timedelta(days=1), today + timedelta(days=days)

    async def refresh_all(self, malls: Sequence[int], days: int, *, limit: int) -> None:
        """Every mall's hours for the next `days`, at most `limit` malls at once."""
        start, end = self.window(days)
        await bounded(malls, limit, lambda m: self.refresh(m, start, end))

    async def refresh(self, mall_id: int, start: date, end: date) -> None:
        """Replace one mall's hours in [start, end] and its current hours.

        A mall deleted upstream since it was listed answers 404: its hours are skipped (its
        deletion reaches the mirror through the deletions feed), and the other malls' hours,
        and the pages running beside them, go on.
        """
        try:
            items = await self.client.hours(mall_id, start, end)
            self.mirror.hours.write(mall_id, stage_hours(mall_id, items), start, end)
            self.mirror.hours.write_current(mall_id, await self.client.current_hours(mall_id))
        except ForbiddenError as exc:
            self.log.warning("backfill.hours_forbidden", mall_id=mall_id, hint=exc.hint)
        except NotFoundError:
            self.log.info("backfill.hours_mall_gone", mall_id=mall_id)
