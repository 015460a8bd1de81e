"""What `ccsync status` reports: per type rows, last sync, lag, cursor and error; queue; subscriptions;
each daemon job's last run, outcome and next run; whether the running daemon's mirror takes
writes; values refused or coerced per type.

Read-only: it opens the mirror without the writer lock, so it works while the daemon runs. A
daemon whose mirror cannot take writes cannot record that in it: it says so in
`<mirror>.health` (`sync.store.watch`), read here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sync.core.redact import redact_text
from sync.jobs.mallincludes import recorded
from sync.store import Mirror
from sync.store.watch import read_health


def _lag(stamp: str | None, now: datetime) -> float | None:
    if not stamp:
        return None
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round((now - then).total_seconds(), 1)


#: A job is overdue this long after its planned next run (and not running).
OVERDUE_GRACE_S = 120.0


def job_problems(jobs: dict[str, dict[str, Any]], now: datetime) -> list[str]:
    """Why the mirror may be stale though the process is alive: a job whose last run failed
    or was refused (a reconcile's mass-delete guard), or that is overdue. Empty when none."""
    problems = []
    for name, job in sorted(jobs.items()):
        if job.get("outcome") in ("error", "refused"):
            error = redact_text(job.get("error") or "no detail")  # stored by an older sync?
            problems.append(f"{name} {job['outcome']}: {error}")
        started, finished = job.get("started_at"), job.get("finished_at")
        running = started is not None and (finished is None or started > finished)
        due = _lag(job.get("next_run_at"), now)
        if not running and due is not None and due > OVERDUE_GRACE_S:
            problems.append(f"{name} overdue by {due:.0f} s")
    return problems


def status_data(path: Path, *, max_per_second: float | None = None) -> dict[str, Any]:
    """Per-type rows, last sync, lag, cursor and error, the queue and subscriptions, as data.

    It reads the mirror file alone (and the daemon's health file beside it), never a secret:
    `ccsync status --mirror PATH` needs no configuration. `max_per_second` is the configured
    request budget, when a configuration was given."""
    mirror = Mirror.open(path, readonly=True)
    now = datetime.now(UTC)
    try:
        types = []
        for s in mirror.status():
            row = s.as_dict()
            row["lag_s"] = _lag(s.last_sync_at, now)
            row["last_error"] = s.last_error and redact_text(s.last_error)
            types.append(row)
        topics = mirror.get_meta("webhook_topics")
        jobs = mirror.jobs()
        for job in jobs.values():  # errors stored by an older sync may hold a secret
            job["error"] = job.get("error") and redact_text(job["error"])
        problems = job_problems(jobs, now)
        health = read_health(path)
        storage = health if health is not None and health.get("status") == "degraded" else None
        if storage is not None:
            problems.insert(
                0,
                f"storage {storage.get('reason')} since {storage.get('since')}: "
                f"{storage.get('file')}: {storage.get('error')}; {storage.get('fix')}",
            )
        return {
            "mirror": str(path),
            "queue_depth": mirror.queue_depth(),
            "subscriptions": topics.split(",") if topics else [],
            "subscriptions_checked_at": mirror.get_meta("webhook_topics_checked_at"),
            "types": types,
            "jobs": list(jobs.values()),
            "problems": problems,
            # The running daemon's storage state (None when no daemon runs, or it is healthy).
            "storage": storage,
            # The rolling verify's place in its cycle (`sync.jobs.verify`), and its last whole cycle.
            "verify_position": mirror.get_meta("verify_position"),
            "verify_cycle_finished_at": mirror.get_meta("verify_cycle_finished_at"),
            # The request budget: as configured, and as the daemon last found it (a 429 lowers
            # it for a while).
            "request_budget": {
                "max_per_second": max_per_second or None,
                **json.loads(mirror.get_meta("request_budget") or "{}"),
            },
            # How the mall-scoped types are polled: through `GET /malls?include=` or per mall,
            # as the daemon last detected (`sync.jobs.mallincludes`), with why.
            "mall_members": recorded(mirror),
            # Where the malls' contacts and deals memberships come from (`sync.jobs.mallroutes`):
            # `include` linkage, a `derived` view checked against the routes, or the `route`s.
            "mall_routes": json.loads(mirror.get_meta("mall_routes") or "{}") or None,
            # The page size the upstream was found to serve ("asked:served", `Paging`).
            "page_size": mirror.get_meta("upstream_paging"),
            # What the upstream answered where the spec is silent (`sync.channel.profile`).
            "upstream_profile": json.loads(mirror.get_meta("upstream_profile") or "null"),
            # Values that did not fit their declared type, per type: refused (the row kept
            # its last good copy; the last one shown) and coerced losslessly.
            "values": mirror.value_faults(),
        }
    finally:
        mirror.close()
