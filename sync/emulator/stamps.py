"""How the emulator writes time: relative stamps, other ISO forms of a stamp, fresh `updated_at`.

Absolute stamps are the spec's `YYYY-MM-DDTHH:mm:ss.SSSZ` (`sync.model.stamps.iso_ms`, shared
with the client as part of the spec's model); relative ones (`display_at`, `start_at`, ...) are
`YYYY-MM-DD HH:mm:ss` with no zone. A changed row's `updated_at` must move strictly forward,
even for several changes within one millisecond: `Stamps.fresh` issues them.
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

from sync.model.stamps import iso_ms


def relative(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def stamp_form(stamp: str, n: int) -> str:
    """`stamp` (`YYYY-MM-DDTHH:MM:SS.sssZ`) written in another ISO 8601 form of the same instant.

    The spec promises the `.sssZ` form; an emulator started with `--stamp-forms` serves these
    others too (picked by `n`), so a client that compares stamps as text is caught: `+00:00`
    for `Z`, the local time of a `+01:00` zone, microseconds, and no fraction when it is zero.
    """
    form = n % 4
    if form == 1:
        return stamp[:-1] + "+00:00"
    if form == 2:
        dt = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(hours=1)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + stamp[20:23] + "+01:00"
    if form == 3:
        return stamp[:19] + "Z" if stamp[20:23] == "000" else stamp[:-1] + "000Z"
    return stamp


class Stamps:
    """Issues `updated_at` values that never go back, and never repeat unless `whole`."""

    def __init__(self) -> None:
        self.last = 0.0

    def fresh(self, now: float, previous: str | None, *, whole: bool = False) -> str:
        """A new stamp: `now`, but strictly after `previous` and after the last one issued.
        `whole` (`Hard.whole_second_stamps`): `now` cut to its second, never before `previous`
        nor the last one issued, and equal to them within one second."""
        if whole:
            ts = float(int(max(now, self.last)))
            stamp = iso_ms(ts)
            if previous is not None and stamp < previous:
                stamp = previous[:20] + "000Z" if previous[20:23] != "000" else previous
                if stamp < previous:  # `previous` had a fraction: the next whole second
                    stamp = iso_ms(float(int(seconds(previous))) + 1.0)
            self.last = max(self.last, seconds(stamp))
            return stamp
        ts = max(now, self.last + 0.001)
        stamp = iso_ms(ts)
        if previous is not None and stamp <= previous:
            ts = seconds(previous) + 0.001
            stamp = iso_ms(ts)
        self.last = ts
        return stamp


def micro(kind: str, stamp: str) -> str:
    """The microseconds below the served millisecond a stamp stands for under
    `Hard.micro_stamps`: three digits, 001-999, one value per `kind` (a type) and served stamp."""
    return f"{zlib.crc32(f'{kind}|{stamp}'.encode()) % 999 + 1:03d}"


def seconds(stamp: str) -> float:
    """The Unix time of a `YYYY-MM-DDTHH:MM:SS.sssZ` stamp."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
