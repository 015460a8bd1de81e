"""A mall's opening hours: `/malls/{id}/hours` (a day per entry) and `/malls/{id}/current-hours`.

The hours are a pure function of the mall's id and the date, so every run and every client sees
the same: 10 AM - 9 PM, 11 AM - 6 PM on Sundays, and closed (a holiday) on one day in 29 that
depends on the mall. `current-hours` reads the emulator's clock (fault offset included).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from aiohttp import web

from sync.emulator.app import EmulatorApp
from sync.emulator.responses import Reply, error, json_response
from sync.emulator.spec import DAYS

#: The most days one `/hours` answer lists, and the widest `from`..`to` it accepts.
MOST_DAYS = 400
WIDEST_RANGE = 366


def hours(mall: int, start: date, end: date) -> list[dict[str, Any]]:
    """The hours entries of `mall` from `start` to `end`, one a day."""
    out: list[dict[str, Any]] = []
    d = start
    while d <= end and len(out) < MOST_DAYS:
        weekday = DAYS[d.weekday()]
        special = (d.toordinal() + mall) % 29 == 0
        text = (
            "Closed"
            if special
            else ("11:00 AM - 6:00 PM" if weekday == "sunday" else "10:00 AM - 9:00 PM")
        )
        out.append(
            {
                "id": d.isoformat(),
                "type": "hours",
                "attributes": {
                    "date": d.isoformat(),
                    "day": weekday.title(),
                    "hours_text": text,
                    "description": "Holiday" if special else "",
                },
            }
        )
        d += timedelta(days=1)
    return out


def current_hours(mall: int, now: float) -> dict[str, Any]:
    """`mall`'s hours today and whether it is open at `now`."""
    at = datetime.fromtimestamp(now, tz=UTC)
    today = hours(mall, at.date(), at.date())[0]["attributes"]
    closed = today["hours_text"] == "Closed"
    sunday = today["day"] == "Sunday"
    opens, closes = ("11:00", "18:00") if sunday else ("10:00", "21:00")
    is_open = not closed and opens <= at.strftime("%H:%M") < closes
    return {
        "data": {
            "mall_id": mall,
            "date": today["date"],
            "is_open": is_open,
            "opens_at": None if closed else opens,
            "closes_at": None if closed else closes,
            "hours_text": today["hours_text"],
        }
    }


class HoursRoutes:
    """Handlers of a mall's hours routes over `emu`."""

    def __init__(self, emu: EmulatorApp) -> None:
        self.emu = emu

    def _day(self, request: web.Request, name: str, default: date) -> date:
        raw = request.query.get(name)
        if raw is None:
            return default
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise Reply(error(400, "Bad Request", f"{name} must be YYYY-MM-DD", name)) from None

    async def hours(self, request: web.Request) -> web.StreamResponse:
        self.emu.auth(request, ("mall",))
        mall = self.emu.rec("malls", request.match_info["id"])
        today = date.fromtimestamp(self.emu.now())
        start = self._day(request, "from", today)
        end = self._day(request, "to", start + timedelta(days=6))
        if end < start or (end - start).days > WIDEST_RANGE:
            return error(
                400, "Bad Request", "to must be on or after from, at most 366 days later", "to"
            )
        return json_response({"data": hours(mall.id, start, end)})

    async def current_hours(self, request: web.Request) -> web.StreamResponse:
        self.emu.auth(request, ("mall",))
        mall = self.emu.rec("malls", request.match_info["id"])
        return json_response(current_hours(mall.id, self.emu.data.now()))
