"""What `ccsync status` reports: per type rows, last sync, lag, cursor and error; queue; subscriptions;
each daemon job's last run, outcome and next run; whether the running daemon's mirror takes
writes; values refused or coerced per type; with several accounts, which account reads which type.

`status_data` gathers it (what `--json` prints); `status_lines` renders it as text.

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
from sync.jobs.accountmap import account_of_types
from sync.jobs.lateness import META_KEY as LATENESS_KEY
from sync.jobs.lateness import shown
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
                # Without a configuration read, the daemon's own record of it (`max_rate`).
                "max_per_second": max_per_second or None,
                "configured": max_per_second is not None,
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
            # With several accounts: which one reads each type (`sync.channel.accounts`).
            "accounts": account_of_types(mirror, [t["type"] for t in types]),
            # What the upstream answered where the spec is silent (`sync.channel.profile`).
            "upstream_profile": json.loads(mirror.get_meta("upstream_profile") or "null"),
            # Values that did not fit their declared type, per type: refused (the row kept
            # its last good copy; the last one shown) and coerced losslessly.
            "values": mirror.value_faults(),
            # Late commits the polls measured and the lookback each type learned
            # (`sync.jobs.lateness`).
            "lateness": shown(mirror.get_meta(LATENESS_KEY), now.timestamp()),
        }
    finally:
        mirror.close()


def status_lines(data: dict[str, Any]) -> list[str]:
    """`status_data` as the lines `ccsync status` prints (without `--json`)."""
    out: list[str] = []
    out.append(f"mirror: {data['mirror']}")
    out.append(f"queue: {data['queue_depth']} notices waiting")
    subs = ", ".join(data["subscriptions"]) or "none recorded"
    out.append(
        f"webhook subscriptions: {subs} (checked {data['subscriptions_checked_at'] or 'never'})"
    )
    budget = data["request_budget"]
    limit = budget.get("max_per_second") or budget.get("max_rate")
    if limit:
        now = f", now {budget['rate']}/s" if "rate" in budget else ""
        hit = f", {budget['throttled']} answers 429" if budget.get("throttled") else ""
        out.append(f"request budget: {limit:g}/s{now}{hit}")
        for number, account in enumerate(budget.get("per_account") or [], start=1):
            hit = f", {account['throttled']} answers 429" if account.get("throttled") else ""
            out.append(
                f"  account {number}: {account.get('max_rate', 0):g}/s, now "
                f"{account.get('rate', 0)}/s{hit}"
            )
    elif budget.get("configured", True):
        out.append("request budget: none ([upstream] max_requests_per_second = 0)")
    else:
        out.append("request budget: not recorded (no configuration read, no daemon has run)")
    members = data["mall_members"]
    if members and members.get("types"):
        out.append(f"mall-scoped types (detected {members.get('detected_at') or '?'}):")
        for name, d in sorted(members["types"].items()):
            how = "GET /malls?include=" if d.get("mode") == "include" else "per-mall listings"
            out.append(f"  {name:<15} {how}: {d.get('reason', '')}")
    for name, source in sorted((data.get("mall_routes") or {}).items()):
        how = {
            "include": "the malls' include= linkage",
            "derived": "derived by a rule the mall routes agreed with",
            "unchecked": "derived by a rule not yet checked against the mall routes",
            "route": "listed from GET /malls/{id}/" + name,
        }.get(source, source)
        out.append(f"malls_{name}: {how}")
    profile = data.get("upstream_profile") or {}
    if profile.get("routes"):
        out.append(f"upstream profile (probed {profile.get('probed_at') or 'at run time'}):")
        for key, r in sorted(profile["routes"].items()):
            refused = sorted(p for p, v in (r.get("includes") or {}).items() if v == "refused")
            bare = sorted(p for p, v in (r.get("includes") or {}).items() if v == "no linkage")
            how = (
                "walked by updated_at"
                if r.get("sort") in ("honoured", "unknown")
                else ("polled unsorted (sort not honoured)")
            )
            line = f"  {key:<28} {how}; etag {r.get('etag', 'unknown')}"
            if refused:
                sources = r.get("linkage_from") or {}
                line += "; include refused: " + ", ".join(
                    f"{p} (linkage {_source(sources.get(p.split('.')[0]))})" for p in refused
                )
            if bare:
                line += f"; include serves no linkage: {', '.join(bare)}"
            out.append(line)
    if data.get("accounts"):
        out.append("accounts (which one reads each type, learned from the upstream's 403s):")
        for name, email in sorted(data["accounts"].items()):
            out.append(f"  {name:<15} read by {email}")
    if data.get("page_size"):
        asked, _, served = str(data["page_size"]).partition(":")
        out.append(f"page size: asked {asked}, upstream serves {served or 'what is asked'}")
    lateness = data.get("lateness") or {}
    if lateness:
        out.append("late commits (rows a poll met stamped behind its cursor) and lookbacks:")
        for name, v in sorted(lateness.items()):
            line = (
                f"  {name:<15} {v['late']} late arrivals, largest {v['largest_s']:g} s; "
                f"lookback {v['lookback_s']:g} s"
            )
            if v.get("last_late_at"):
                line += f" (last late arrival {v['last_late_at']})"
            out.append(line)
    for problem in data["problems"]:
        out.append(f"degraded: {problem}")
    for name, v in sorted(data["values"].items()):
        line = f"values of {name}: {v['refused']} refused, {v['coerced']} coerced"
        last = v.get("last_refused")
        if last:
            line += (
                f" (rows kept at their last good copy; last: id {last['id']} "
                f"{last['attribute']} = {last['value']}: {last['problem']})"
            )
        out.append(line)
    if data["jobs"]:
        out.append(f"{'job':<15} {'last run':<24} {'outcome':<11} {'next run':<24}  error")
        for j in data["jobs"]:
            out.append(
                f"{j['name']:<15} {j['started_at'] or 'never':<24} {j['outcome'] or '-':<11} "
                f"{j['next_run_at'] or '-':<24}  {j['error'] or ''}"
            )
    if data["verify_position"] or data["verify_cycle_finished_at"]:
        out.append(
            f"verify: position {data['verify_position'] or 'start of a cycle'}; last whole "
            f"cycle finished {data['verify_cycle_finished_at'] or 'never'}"
        )
    out.append(f"{'type':<15} {'rows':>9}  {'last sync':<24} {'lag s':>8}  {'cursor':<24}  error")
    for t in data["types"]:
        lag = "-" if t["lag_s"] is None else f"{t['lag_s']:.0f}"
        out.append(
            f"{t['type']:<15} {t['rows']:>9,}  {t['last_sync_at'] or '-':<24} {lag:>8}  "
            f"{t['cursor'] or '-':<24}  {t['last_error'] or ''}"
        )
    return out


def _source(route: str | None) -> str:
    """Where a refused include path's linkage comes from, for `ccsync status`."""
    return "not mirrored" if route in (None, "not mirrored") else f"from {route}"
