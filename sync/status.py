"""What `sync status` reports: per type rows, last sync, lag, cursor and error; queue; subscriptions;
each daemon job's last run, outcome and next run.

Read-only: it opens the mirror without the writer lock, so it works while the daemon runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sync.config import Settings
from sync.store import Mirror


def _lag(stamp: str | None, now: datetime) -> float | None:
    if not stamp:
        return None
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round((now - then).total_seconds(), 1)


def status_data(settings: Settings) -> dict[str, Any]:
    """Per-type rows, last sync, lag, cursor and error, the queue and subscriptions, as data."""
    mirror = Mirror.open(settings.mirror.path, readonly=True)
    now = datetime.now(UTC)
    try:
        types = []
        for s in mirror.status():
            row = s.as_dict()
            row["lag_s"] = _lag(s.last_sync_at, now)
            types.append(row)
        topics = mirror.get_meta("webhook_topics")
        return {
            "mirror": str(settings.mirror.path),
            "queue_depth": mirror.queue_depth(),
            "subscriptions": topics.split(",") if topics else [],
            "subscriptions_checked_at": mirror.get_meta("webhook_topics_checked_at"),
            "types": types,
            "jobs": [{k: v for k, v in job.items()} for job in mirror.jobs().values()],
        }
    finally:
        mirror.close()
