"""The head of `ccsync status`: one verdict line, then the problems `/healthz` would list.

The verdict is `healthy`, `starting (first backfill)`, `degraded: <the first problem>`,
`stopped since <when>` or `not running (never ran)`. The problems are what status computes from
the mirror (a job failed or overdue, the proof's open differences, the daemon's storage fault in
`<mirror>.health`) and what only the running daemon knows (an unreachable upstream, a first
backfill that failed, types failing): the daemon records those in the mirror as they change
(`record`, key `DAEMON_HEALTH`), so that status, which reads only the file, shows them too.
"""

from __future__ import annotations

import json
from typing import Any

from sync.model.stamps import now_iso
from sync.store.seamparts import MetaPart

#: `_sync_meta` key: the running daemon's own problems and readiness (`record`).
DAEMON_HEALTH = "daemon_health"


def record(meta: MetaPart, *, ready: bool, problems: list[str]) -> None:
    """Keep the running daemon's readiness and the problems only it knows (`Health.live`)."""
    meta.set(DAEMON_HEALTH, json.dumps({"ready": ready, "problems": problems, "at": now_iso()}))


def recorded(meta: MetaPart) -> dict[str, Any]:
    """What the daemon last recorded (`record`): `ready` (True when never recorded, as a
    daemon of an older sync) and `problems`."""
    try:
        kept = json.loads(meta.get(DAEMON_HEALTH) or "{}")
    except ValueError:
        kept = {}
    return {"ready": bool(kept.get("ready", True)), "problems": list(kept.get("problems") or [])}


def verdict(daemon: dict[str, Any], problems: list[str]) -> str:
    """The first line of `ccsync status`, from `daemon_state` and the problems."""
    if not daemon.get("running", True):
        since = daemon.get("stopped_at")
        if not since:
            return "not running (never ran)"
        killed = (
            " (it ended without recording it: killed?)"
            if daemon.get("last_status") == "interrupted"
            else ""
        )
        return f"stopped since {since}{killed}"
    if problems:
        more = f" (and {len(problems) - 1} more below)" if len(problems) > 1 else ""
        return f"degraded: {problems[0]}{more}"
    if not daemon.get("ready", True):
        return "starting (first backfill)"
    return "healthy"


def verdict_lines(data: dict[str, Any]) -> list[str]:
    """The verdict and every problem: `problem: ...` while a daemon runs, `left by the last
    run: ...` when none does (nothing is degraded now; they are what the last run left)."""
    daemon = data.get("daemon") or {"running": True}
    problems = list(data.get("problems") or [])
    label = "problem" if daemon.get("running", True) else "left by the last run"
    return [verdict(daemon, problems)] + [f"{label}: {p}" for p in problems]
