"""The API's absolute timestamp format, `YYYY-MM-DDTHH:mm:ss.SSSZ` (UTC, milliseconds).

Cursors, checkpoints and bookkeeping stamps all use it, so they compare as text with the
upstream's own `updated_at` and `created_at` values.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta


def iso_ms(ts: float) -> str:
    """Unix time in the API's absolute format."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def now_iso() -> str:
    """This machine's current time in the API's format."""
    return iso_ms(time.time())


def shift(stamp: str, seconds: float) -> str:
    """`stamp` (the API's absolute format, or a date) moved by `seconds`."""
    s = stamp.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "T" in s else "%Y-%m-%d"
    dt = datetime.strptime(s, fmt).replace(tzinfo=UTC) + timedelta(seconds=seconds)
    return iso_ms(dt.timestamp())


def shift_ms(stamp: str, ms: int) -> str:
    """A normalised stamp (`YYYY-MM-DDTHH:MM:SS.sssZ`) moved by whole milliseconds, exactly
    (`shift` goes through a float: a millisecond may round away)."""
    dt = datetime.strptime(stamp.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f") + timedelta(milliseconds=ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


#: Attributes the spec calls absolute timestamps (ISO 8601 UTC): normalised on write so that
#: text order is time order. Relative ones (display_at, start_at, end_at: `YYYY-MM-DD HH:mm:ss`
#: with no zone) are stored as served.
ABSOLUTE = frozenset(
    {
        "created_at",
        "updated_at",
        "opening_date",
        "trending_expired_at",
        "confirmed_at",
        "token_expired_at",
    }
)

CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


class StampError(ValueError):
    """An absolute timestamp that is not ISO 8601."""


def normalize(stamp: str) -> str:
    """An absolute ISO 8601 stamp in the one fixed-width form `YYYY-MM-DDTHH:MM:SS.sssZ` (UTC).

    The spec promises `...SS.sssZ`, but an upstream that sends `...:00Z`, `.123456Z` or
    `+01:00` would otherwise compare wrongly as text against stored stamps (the write guard and
    the poll cursors compare text): `2026-01-01T01:00:00+01:00` is older than
    `2026-01-01T00:30:00.000Z`. A stamp without a zone is taken as UTC (the spec says UTC); a
    bare date is midnight UTC. Sub-millisecond digits are truncated. Raises `StampError` for
    anything else, with the value in the message.
    """
    if CANONICAL.fullmatch(stamp):
        return stamp  # the common case: one regex match, no parsing
    text = stamp.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise StampError(f"{stamp[:60]!r} is not an ISO 8601 timestamp") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        dt = dt.astimezone(UTC)  # 0001-01-01T00:00+01:00 has no UTC date in the calendar
    except OverflowError:
        raise StampError(f"{stamp[:60]!r} is out of range") from None
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def normalize_or_none(stamp: object) -> str | None:
    """`normalize` for values of unknown type: None for anything that is not a valid stamp."""
    if not isinstance(stamp, str):
        return None
    try:
        return normalize(stamp)
    except StampError:
        return None


#: RFC 3339 `date-time`, the format the management API's spec names: a date, `T`, a time with
#: optional fraction, and a zone that is required (`Z` or `+hh:mm`).
RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)",
    re.ASCII,
)


def is_date_time(value: object) -> bool:
    """Whether `value` is an RFC 3339 date-time string naming a real instant."""
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
