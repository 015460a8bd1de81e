"""`sync.jobs.malls.hours`: one mall's hours replace its window and its current hours; a 403 or a
mall gone (404) leaves the mirror as it was, and the other malls go on."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from structlog.testing import capture_logs

from sync.channel.clock import UpstreamClock
from sync.core.errors import ForbiddenError, NotFoundError
from sync.jobs.malls.hours import MallHours
from sync.store import Mirror

#: 2026-05-10T12:00:00Z
NOON = datetime(2026, 5, 10, 12, tzinfo=UTC).timestamp()


class HoursClient:
    """Serves one day of hours per mall in the window asked; refuses or lost malls as told."""

    def __init__(self) -> None:
        self.clock = UpstreamClock(local=lambda: NOON)
        self.forbidden: set[int] = set()
        self.gone: set[int] = set()
        self.asked: list[tuple[int, date, date]] = []

    async def hours(self, mall_id: int, start: date, end: date) -> list[dict[str, Any]]:
        self.asked.append((mall_id, start, end))
        if mall_id in self.forbidden:
            raise ForbiddenError("no hours for you", status=403, hint="ask for the hours scope")
        if mall_id in self.gone:
            raise NotFoundError("no such mall", status=404)
        return [
            {"id": f"{mall_id}-{start}", "attributes": {"date": start.isoformat(), "hours": "9-5"}},
            {"attributes": {"hours": "no date: left out"}},
        ]

    async def current_hours(self, mall_id: int) -> Any:
        return {"data": {"open": True, "mall": mall_id}}


async def test_every_mall_gets_the_window_and_its_current_hours(mirror: Mirror) -> None:
    client = HoursClient()
    hours = MallHours(client, mirror, clock=lambda: NOON)
    assert hours.window(2) == (date(2026, 5, 9), date(2026, 5, 12))
    await hours.refresh_all([1, 2], 2, limit=1)
    assert client.asked == [
        (1, date(2026, 5, 9), date(2026, 5, 12)),
        (2, date(2026, 5, 9), date(2026, 5, 12)),
    ]
    rows = mirror.conn.execute("SELECT mall_id, date, hours FROM hours ORDER BY mall_id").fetchall()
    assert [tuple(r) for r in rows] == [(1, "2026-05-09", "9-5"), (2, "2026-05-09", "9-5")]
    current = mirror.conn.execute("SELECT mall_id FROM current_hours ORDER BY mall_id").fetchall()
    assert [r[0] for r in current] == [1, 2]


async def test_a_refused_or_gone_mall_is_logged_and_the_others_go_on(mirror: Mirror) -> None:
    client = HoursClient()
    client.forbidden, client.gone = {1}, {2}
    hours = MallHours(client, mirror, clock=lambda: NOON)
    with capture_logs() as logs:
        await hours.refresh_all([1, 2, 3], 0, limit=3)
    events = sorted((e["event"], e["mall_id"]) for e in logs)
    assert events == [("backfill.hours_forbidden", 1), ("backfill.hours_mall_gone", 2)]
    assert [e.get("hint") for e in logs if e["event"] == "backfill.hours_forbidden"] == [
        "ask for the hours scope"
    ]
    current = mirror.conn.execute("SELECT mall_id FROM current_hours").fetchall()
    assert [r[0] for r in current] == [3]
