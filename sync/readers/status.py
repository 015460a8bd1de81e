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
from sync.core.target import MirrorTarget
from sync.jobs.accountmap import account_of_types
from sync.jobs.incremental.feed import unknown_types
from sync.jobs.incremental.lateness import META_KEY as LATENESS_KEY
from sync.jobs.incremental.lateness import shown
from sync.jobs.malls.mallincludes import recorded
from sync.jobs.probe import route_words
from sync.jobs.proving.pacing import keepable_bound
from sync.readers import verdict as daemon_health
from sync.readers.backlog import queue_drain, queue_line
from sync.readers.running import (
    backfill_lines,
    backfill_state,
    daemon_lines,
    daemon_state,
)
from sync.readers.verdict import verdict, verdict_lines
from sync.store import MirrorStore
from sync.store import proof as proof_book
from sync.store.opening import open_mirror
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


def job_problems(
    jobs: dict[str, dict[str, Any]], now: datetime, *, overdue: bool = True
) -> list[str]:
    """Why the mirror may be stale though the process is alive: a job whose last run failed
    or was refused (a reconcile's mass-delete guard), or that is overdue (unless `overdue`
    is false: with no daemon running, every job is late, `overdue_jobs`). Empty when none."""
    problems = []
    for name, job in sorted(jobs.items()):
        if job.get("outcome") in ("error", "refused"):
            error = redact_text(job.get("error") or "no detail")  # stored by an older sync?
            problems.append(f"{name} {job['outcome']}: {error}")
        started, finished = job.get("started_at"), job.get("finished_at")
        running = started is not None and (finished is None or started > finished)
        due = _lag(job.get("next_run_at"), now)
        if overdue and not running and due is not None and due > OVERDUE_GRACE_S:
            problems.append(f"{name} overdue by {due:.0f} s")
    return problems


def overdue_jobs(jobs: dict[str, dict[str, Any]], now: datetime) -> list[str]:
    """The jobs past their next run by more than `OVERDUE_GRACE_S`."""
    late = []
    for name, job in sorted(jobs.items()):
        due = _lag(job.get("next_run_at"), now)
        if due is not None and due > OVERDUE_GRACE_S:
            late.append(name)
    return late


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 notice`, `2 notices`: a number with its noun agreeing."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def _page_size(mirror: MirrorStore) -> dict[str, int | None] | None:
    """The page size as numbers, `{"asked": 100, "served": None}` (served None: no smaller
    bound seen): what a walk learned (`sync.channel.paging`, kept "asked:served"), else what the
    daemon's probe found, else None."""
    learned = mirror.meta.get("upstream_paging")
    if learned:
        asked, _, served = learned.partition(":")
        return {"asked": _number(asked), "served": _number(served)}
    profile = json.loads(mirror.meta.get("upstream_profile") or "null") or {}
    if not profile.get("page_size_asked"):
        return None
    return {
        "asked": _number(profile["page_size_asked"]),
        "served": _number(profile.get("page_size_served")),
    }


def _number(value: object) -> int | None:
    try:
        return int(str(value)) if value not in (None, "") else None
    except ValueError:
        return None


def proof_problems(mirror: MirrorStore, now: datetime, bound: float | None) -> list[str]:
    """What the rolling proof leaves open: a type whose last proof left rows unresolved (the
    mass-delete guard holds rows absent from a listing whose deletion is not confirmed), and
    one not proven complete for over twice the staleness bound."""
    problems = []
    recorded_bound = mirror.meta.get("staleness_bound")
    bound = bound or (float(recorded_bound) if recorded_bound else None)
    for name, entry in sorted(mirror.proof.proven().items()):
        if entry.get("unresolved"):
            problems.append(f"proof of {name}: {entry.get('why') or 'differences unresolved'}")
        age = _lag(entry.get("proven_at"), now)
        if bound and age is not None and age > 2 * bound:
            problems.append(
                f"proof of {name}: last proven complete {age:.0f} s ago, over twice the "
                f"staleness bound ({bound:.0f} s)"
            )
    return problems


def proof_data(mirror: MirrorStore, now: datetime, rate: float | None) -> dict[str, Any]:
    """The rolling proof, as `ccsync status` shows it: per type when it was last proven
    complete and its age, the bound (and the verify's beside it), whether the request budget
    can keep the bound, the repairs by kind, and the change lag's p50/p99 by path."""
    bound_text = mirror.meta.get("staleness_bound")
    bound = float(bound_text) if bound_text else None
    cost_text = mirror.meta.get("proof_cycle_cost")
    verify = mirror.meta.get("verify_interval")
    types = {}
    scopes = mirror.proof.scopes()
    for name, entry in sorted(mirror.proof.proven().items()):
        per_scope = scopes.get(name, {})
        types[name] = {
            **entry,
            "age_s": _lag(entry.get("proven_at"), now),
            # Per scope (`top`, or each mall): how many were proven, and the oldest.
            "scopes": per_scope.get("scopes", 0),
            "oldest_scope": per_scope.get("oldest_scope"),
            "oldest_scope_age_s": _lag(per_scope.get("oldest_at"), now),
        }
    lags: dict[str, dict[str, Any]] = {}
    for name, paths in sorted(mirror.proof.lags().items()):
        for path, summary in sorted(paths.items()):
            sample = [float(x) for x in summary.get("sample") or []]
            lags.setdefault(name, {})[path] = {
                "count": summary.get("count", 0),
                "p50_s": proof_book.percentile(sample, 0.5),
                "p99_s": proof_book.percentile(sample, 0.99),
            }
    keep = (
        keepable_bound(int(cost_text), rate or 0.0, bound)
        if bound is not None and cost_text
        else None
    )
    return {
        "staleness_bound_s": bound,
        "verify_interval_s": float(verify) if verify else None,
        "cycle_requests": int(cost_text) if cost_text else None,
        "budget": keep,
        "position": mirror.proof.position(),
        "types": types,
        "repairs": mirror.proof.repairs(),
        "change_lag": lags,
    }


def status_data(
    where: MirrorTarget | Path, *, max_per_second: float | None = None
) -> dict[str, Any]:
    """Per-type rows, last sync, lag, cursor and error, the queue and subscriptions, as data.

    It reads the mirror alone (a file's path, or a target; for a file, the daemon's health
    file beside it too: a PostgreSQL mirror has none), never a secret: `ccsync status --mirror
    PATH|URL` needs no configuration. `max_per_second` is the configured request budget, when
    a configuration was given."""
    target = where if isinstance(where, MirrorTarget) else MirrorTarget(path=where)
    mirror = open_mirror(target, readonly=True)
    now = datetime.now(UTC)
    try:
        types = []
        for s in mirror.types.lines():
            row = s.as_dict()
            row["lag_s"] = _lag(s.last_sync_at, now)
            row["last_error"] = s.last_error and redact_text(s.last_error)
            types.append(row)
        topics = mirror.meta.get("webhook_topics")
        jobs = mirror.jobs.all()
        for job in jobs.values():  # errors stored by an older sync may hold a secret
            job["error"] = job.get("error") and redact_text(job["error"])
        daemon = daemon_state(mirror, target)
        problems = job_problems(jobs, now, overdue=daemon["running"]) + proof_problems(
            mirror, now, None
        )
        if not daemon["running"]:
            daemon["overdue"] = overdue_jobs(jobs, now)
        health = read_health(target.path) if target.path is not None else None
        storage = health if health is not None and health.get("status") == "degraded" else None
        if daemon["running"]:  # what only the daemon knows: an unreachable upstream...
            own = daemon_health.recorded(mirror.meta)
            daemon["ready"] = own["ready"]
            problems = own["problems"] + [p for p in problems if p not in own["problems"]]
        if storage is not None:
            problems.insert(
                0,
                f"storage {storage.get('reason')} since {storage.get('since')}: "
                f"{storage.get('file')}: {storage.get('error')}; {storage.get('fix')}",
            )
        return {
            # The first line of `ccsync status` (`sync.readers.verdict`).
            "verdict": verdict(daemon, problems),
            "mirror": target.describe(),
            "queue_depth": mirror.queue.waiting(),
            # The `filter[id]` requests the queue needs at least, and the seconds they take at
            # the request budget (None without one): `queue_drain`.
            **queue_drain(
                mirror.queue.lanes(),
                _page_size(mirror),
                max_per_second
                or json.loads(mirror.meta.get("request_budget") or "{}").get("max_rate"),
            ),
            # Whether a daemon holds the mirror now: pid, since, last heartbeat (`daemon_state`).
            "daemon": daemon,
            # The last backfill run, an unfinished one, the types never completed.
            "backfill": backfill_state(mirror, target),
            "subscriptions": topics.split(",") if topics else [],
            "subscriptions_checked_at": mirror.meta.get("webhook_topics_checked_at"),
            "types": types,
            "jobs": list(jobs.values()),
            "problems": problems,
            # The running daemon's storage state (None when no daemon runs, or it is healthy).
            "storage": storage,
            # The rolling verify's place in its cycle (`sync.jobs.proving.verify`; None at the start of
            # a cycle), and when its last whole cycle finished.
            "verify_position": mirror.meta.get("verify_position"),
            "verify_cycle_finished_at": mirror.meta.get("verify_cycle_finished_at"),
            # The rolling proof (`sync.jobs.proving.proof`): proven ages, repairs, freshness.
            "proof": proof_data(
                mirror,
                now,
                max_per_second
                or json.loads(mirror.meta.get("request_budget") or "{}").get("max_rate"),
            ),
            # The request budget: as configured, and as the daemon last found it (a 429 lowers
            # it for a while).
            "request_budget": {
                # Without a configuration read, the daemon's own record of it (`max_rate`).
                "max_per_second": max_per_second or None,
                "configured": max_per_second is not None,
                **json.loads(mirror.meta.get("request_budget") or "{}"),
            },
            # How the mall-scoped types are polled: through `GET /malls?include=` or per mall,
            # as the daemon last detected (`sync.jobs.malls.mallincludes`), with why.
            "mall_members": recorded(mirror),
            # Where the malls' contacts and deals memberships come from (`sync.jobs.malls.mallroutes`):
            # `include` linkage, a `derived` view checked against the routes, or the `route`s.
            "mall_routes": json.loads(mirror.meta.get("mall_routes") or "{}") or None,
            # What each of those rests on: the malls' routes the rule was checked against, or
            # why the routes fill the table.
            "mall_routes_why": json.loads(mirror.meta.get("mall_routes_why") or "{}") or None,
            # The page size the upstream was found to serve: {"asked": n, "served": n or None}.
            "page_size": _page_size(mirror),
            # With several accounts: which one reads each type (`sync.channel.accounts`).
            "accounts": account_of_types(mirror, [t["type"] for t in types]),
            # What the upstream answered where the spec is silent (`sync.channel.profile`).
            "upstream_profile": json.loads(mirror.meta.get("upstream_profile") or "null"),
            # Values that did not fit their declared type, per type: refused (the row kept
            # its last good copy; the last one shown) and coerced losslessly.
            "values": mirror.values.faults(),
            # Deletions feed entries skipped: their resource_type maps to no type (`sync.jobs.incremental.feed`).
            "feed_unknown_types": unknown_types(mirror),
            # Late commits the polls measured and the lookback each type learned
            # (`sync.jobs.incremental.lateness`).
            "lateness": shown(mirror.meta.get(LATENESS_KEY), now.timestamp()),
        }
    finally:
        mirror.close()


def status_lines(data: dict[str, Any]) -> list[str]:
    """`status_data` as the lines `ccsync status` prints (without `--json`): the verdict, the
    problems and the per-type table first (`head_lines`), then the details."""
    return head_lines(data) + detail_lines(data)


def head_lines(data: dict[str, Any]) -> list[str]:
    """The verdict and the problems (`sync.readers.verdict`), then the per-type table."""
    out = verdict_lines(data)
    out.append(f"{'type':<15} {'rows':>9}  {'last sync':<24} {'lag s':>8}  {'cursor':<24}  error")
    for t in data["types"]:
        lag = "-" if t["lag_s"] is None else f"{t['lag_s']:.0f}"
        out.append(
            f"{t['type']:<15} {t['rows']:>9,}  {t['last_sync_at'] or '-':<24} {lag:>8}  "
            f"{t['cursor'] or '-':<24}  {t['last_error'] or ''}"
        )
    return out


def detail_lines(data: dict[str, Any]) -> list[str]:
    """Everything else `ccsync status` shows, after the table: who runs, the backfill, the
    queue, subscriptions, budget, how types are read, values, jobs, the verify and the proof."""
    out: list[str] = []
    out.append(f"mirror: {data['mirror']}")
    if "daemon" in data:
        out += daemon_lines(data["daemon"], data["daemon"].get("overdue") or [])
    if "backfill" in data:
        out += backfill_lines(data["backfill"])
    out.append(queue_line(data))
    subs = ", ".join(data["subscriptions"]) or "none recorded"
    out.append(
        f"webhook subscriptions: {subs} (checked {data['subscriptions_checked_at'] or 'never'})"
    )
    budget = data["request_budget"]
    limit = budget.get("max_per_second") or budget.get("max_rate")
    if limit:
        now = f", now {budget['rate']}/s" if "rate" in budget else ""
        hit = f", {counted(budget['throttled'], 'answer')} 429" if budget.get("throttled") else ""
        out.append(f"request budget: {limit:g}/s{now}{hit}")
        for number, account in enumerate(budget.get("per_account") or [], start=1):
            hit = (
                f", {counted(account['throttled'], 'answer')} 429"
                if account.get("throttled")
                else ""
            )
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
    reasons = data.get("mall_routes_why") or {}
    for name, source in sorted((data.get("mall_routes") or {}).items()):
        how = {
            "include": "the malls' include= linkage",
            "derived": "derived by a rule",
            "unchecked": "derived by a rule not yet checked against the mall routes",
            "route": "listed from GET /malls/{id}/" + name,
        }.get(source, source)
        why = reasons.get(name)
        if source == "derived" and not why:  # written before the reason was kept
            why = "checked against the mall routes before this version kept how"
        out.append(f"malls_{name}: {how}" + (f": {why}" if why else ""))
    profile = data.get("upstream_profile") or {}
    if profile.get("routes"):
        out.append(f"upstream profile (probed {profile.get('probed_at') or 'at run time'}):")
        out += [
            f"  {key:<28} {route_words(key, r)}" for key, r in sorted(profile["routes"].items())
        ]
    if data.get("accounts"):
        out.append("accounts (which one reads each type, learned from the upstream's 403s):")
        for name, email in sorted(data["accounts"].items()):
            out.append(f"  {name:<15} read by {email}")
    if data.get("page_size"):
        asked, served = data["page_size"]["asked"], data["page_size"]["served"]
        out.append(
            f"page size: asked {asked}, upstream serves "
            f"{served or 'what is asked (no smaller bound seen)'}"
        )
    out += lateness_lines(data.get("lateness") or {})
    for name, v in sorted(data["values"].items()):
        line = f"values of {name}: {v['refused']} refused, {v['coerced']} coerced"
        last = v.get("last_refused")
        if last:
            line += (
                f" (rows kept at their last good copy; last: id {last['id']} "
                f"{last['attribute']} = {last['value']}: {last['problem']})"
            )
        out.append(line)
    for name, n in sorted((data.get("feed_unknown_types") or {}).items()):
        out.append(f"deletions feed: {n} entries of unknown resource_type {name!r} (skipped)")
    if data["jobs"]:
        out.append(f"{'job':<15} {'last run':<24} {'outcome':<11} {'next run':<24}  error")
        for j in data["jobs"]:
            out.append(
                f"{j['name']:<15} {j['started_at'] or 'never':<24} {j['outcome'] or '-':<11} "
                f"{j['next_run_at'] or '-':<24}  {j['error'] or ''}"
            )
    verify_ran = any(j.get("name") == "verify" and j.get("started_at") for j in data["jobs"])
    if data["verify_position"] or data["verify_cycle_finished_at"] or verify_ran:
        out.append(
            f"verify: position {data['verify_position'] or 'start of a cycle'}; last whole "
            f"cycle finished {data['verify_cycle_finished_at'] or 'never'}"
        )
    out += proof_lines(data.get("proof") or {})
    return out


def lateness_lines(lateness: dict[str, dict[str, Any]]) -> list[str]:
    """The late commits the polls measured and each type's lookback: one line per type that saw
    any (or whose lookback is above the others'), one line in all when none did."""
    if not lateness:
        return []
    floor = min(v["lookback_s"] for v in lateness.values())
    shown = {n: v for n, v in lateness.items() if v["late"] or v["lookback_s"] > floor}
    if not shown:
        return [
            f"late commits: none measured on {counted(len(lateness), 'listing')}; "
            f"lookback {floor:g} s"
        ]
    out = [
        "late commits (rows a poll met stamped behind its cursor) and lookbacks "
        f"(the others: none, lookback {floor:g} s):"
    ]
    for name, v in sorted(shown.items()):
        line = (
            f"  {name:<15} {counted(v['late'], 'late arrival')}, largest "
            f"{v['largest_s']:g} s; lookback {v['lookback_s']:g} s"
        )
        if v.get("last_late_at"):
            line += f" (last late arrival {v['last_late_at']})"
        out.append(line)
    return out


def proof_lines(proof: dict[str, Any]) -> list[str]:
    """The rolling proof's lines of `ccsync status`."""
    out: list[str] = []
    bound = proof.get("staleness_bound_s")
    if bound is not None or proof.get("types"):
        verify = proof.get("verify_interval_s")
        beside = (
            f"; content under an unchanged stamp: the verify, every {verify:.0f} s"
            if verify
            else ""
        )
        out.append(f"proof: staleness bound {bound or 0:.0f} s{beside}")
    keep = proof.get("budget")
    if keep and not keep.get("fits"):
        out.append(
            f"  the request budget cannot keep it: a cycle takes {proof.get('cycle_requests')} "
            f"requests; it can keep {keep['keepable_s']:.0f} s, {keep['short_by_s']:.0f} s short "
            "(raise [upstream] max_requests_per_second or [schedule] staleness_bound)"
        )
    for name, t in sorted((proof.get("types") or {}).items()):
        age = t.get("age_s")
        when = "never" if age is None else f"{age:.0f} s ago"
        line = f"  {name:<15} proven complete {when} (bound {bound or 0:.0f} s)"
        if t.get("scopes", 0) > 1 and t.get("oldest_scope_age_s") is not None:
            line += (
                f"; {t['scopes']} scopes, the oldest (mall {t['oldest_scope']}) proven "
                f"{t['oldest_scope_age_s']:.0f} s ago"
            )
        if t.get("unresolved"):
            line += f"; unresolved: {t.get('why')}"
        out.append(line)
    repairs = proof.get("repairs") or {}
    if repairs:
        totals: dict[str, int] = {}
        for kinds in repairs.values():
            for kind, n in kinds.items():
                totals[kind] = totals.get(kind, 0) + int(n)
        out.append(
            "repairs (what notices and polls missed): "
            + ", ".join(f"{kind} {n}" for kind, n in sorted(totals.items()))
        )
        for name, kinds in sorted(repairs.items()):
            out.append(f"  {name:<15} " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    for name, paths in sorted((proof.get("change_lag") or {}).items()):
        parts = [
            f"{path} p50 {p['p50_s']:.1f} s, p99 {p['p99_s']:.1f} s ({counted(p['count'], 'change')})"
            for path, p in sorted(paths.items())
            if p.get("p50_s") is not None
        ]
        if parts:
            out.append(f"change lag {name}: " + "; ".join(parts))
    return out
