"""The daemon's schedule arithmetic: when each job first runs, how often, and what a cycle costs.

Pure maths, apart from I/O (like arq's `cron.py:next_cron`): nothing here reads the clock, the
mirror or the network, so each rule is tested alone (`tests/unit/daemon/test_schedule.py`) and
the daemon (`sync.daemon.service`) and its job bodies (`sync.daemon.bodies`) only feed it numbers.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sync.channel.budget import Priority

#: Seconds after start of the first poll and deletions-feed run (they catch up at once).
CATCH_UP = 0.5
#: The request budget's priority of each job's requests (the queue worker's are WEBHOOK).
JOB_PRIORITY: dict[str, Priority] = {
    "poll": Priority.POLL,
    "deletions": Priority.POLL,
    "subscriptions": Priority.POLL,
    "reconcile": Priority.RECONCILE,
    "proof": Priority.PROOF,
    "verify": Priority.RECONCILE,
    "hours": Priority.HOURS,
    "press_releases": Priority.HOURS,
    "changes": Priority.HOURS,
}
#: An overdue job (its stored next run has passed) starts within this window after start,
#: at a random moment (jitter: many daemons restarted together do not hit the upstream at once).
OVERDUE_JITTER = (5.0, 60.0)
#: The rolling verify's tick at most: each tick verifies a share of the mirror sized so that
#: the whole of it is covered once per `verify_interval` (a flat request rate).
VERIFY_TICK = 60.0
#: How `_sync_jobs` and `_sync_types` write their stamps (`sync.model.stamps.iso_ms`).
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
#: Seconds before a failed first backfill is asked again: the first wait, and the most it grows
#: to (doubling per failure in a row).
BACKFILL_RETRY_S = (2.0, 300.0)


def doubling(failures: int, first: float, most: float) -> float:
    """The wait after `failures` failures in a row: `first` doubling to `most` (no overflow
    after days of them)."""
    return min(most, first * 2.0 ** min(failures - 1, 16))


def backfill_retry_delay(failures: int) -> float:
    """The wait after `failures` failed first backfills in a row: 2 s doubling to 300 s."""
    return doubling(failures, *BACKFILL_RETRY_S)


def parse_stamp(stamp: str) -> datetime | None:
    """A stamp as the mirror's bookkeeping writes it, or None for anything else."""
    try:
        return datetime.strptime(stamp, STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def verify_tick(interval: float) -> float:
    """Seconds between two steps of the rolling verify (`VERIFY_TICK`, shorter for a short
    `verify_interval`, so a cycle still takes about 100 steps or more)."""
    return min(VERIFY_TICK, max(interval / 100, 1.0))


def verify_share(cost: int, interval: float) -> float:
    """Requests one step earns, so that a cycle costing `cost` requests takes `interval`:
    a step spends whole requests, and carries what it overspent or left to the next."""
    return cost * verify_tick(interval) / interval


def first_run(name: str, every: float, first: float, stored: str | None, now: datetime) -> datetime:
    """When job `name` first runs after a start.

    Polls and the deletions feed (`first` = `CATCH_UP`) run at once. Other jobs keep the
    schedule they had: the next run stored by the previous process (`stored`, from
    `_sync_jobs`) if it is still ahead (capped at one interval from now), shortly after start
    with jitter if it has passed (a daemon restarted more often than its reconcile interval
    still reconciles), and one interval from now on a mirror that never ran it.
    """
    if first <= CATCH_UP:
        return now + timedelta(seconds=first)
    due = parse_stamp(stored) if stored else None
    if due is None:
        return now + timedelta(seconds=first)
    if due <= now:
        low, high = OVERDUE_JITTER
        high = max(low, min(high, every / 10))
        return now + timedelta(seconds=random.uniform(min(low, every), min(high, every)))
    return min(due, now + timedelta(seconds=every))


def poll_cycle(requests: int, rate: float, poll_interval: float) -> dict[str, float]:
    """What one poll cycle of `requests` costs at `rate` requests a second (0: no budget), and
    so the staleness bound without webhooks: `poll_interval` + that time."""
    seconds = requests / rate if rate > 0 else 0.0
    return {
        "requests": requests,
        "seconds_at_budget": round(seconds, 1),
        "staleness_bound_s": round(poll_interval + seconds, 1),
    }
