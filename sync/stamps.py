"""The API's absolute timestamp format, `YYYY-MM-DDTHH:mm:ss.SSSZ` (UTC, milliseconds).

Cursors, checkpoints and bookkeeping stamps all use it, so they compare as text with the
upstream's own `updated_at` and `created_at` values.
"""

from __future__ import annotations

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
