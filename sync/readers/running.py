"""Who is running on the mirror, for `ccsync status`: the daemon (pid, since, last heartbeat),
or since when none has; another process holding it; the last backfill run, an unfinished one.

From the writer lock's holder (`sync.store.lock.holder_pid`, the kernel's word) and the run
records (`sync.store.runs`): a daemon killed with SIGKILL leaves a run `running` that no
process holds, and is shown as not running since it was last seen; a backfill's, as
`interrupted`. A PostgreSQL mirror's writer is the holder of its active lock
(`sync.store.pg.lock.holder_of`: the server's word, its pid the one in the holder's
application name, on its own host); where that cannot be asked (a replica), a daemon's run is
judged by its heartbeat alone: running while seen within `STALE_S`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.core.errors import MirrorError
from sync.core.redact import redact_text
from sync.core.target import MirrorTarget
from sync.jobs.backfilling.backfillrun import STARTED_AT, STARTED_LOCAL
from sync.model.stamps import iso_ms
from sync.store import MirrorStore
from sync.store.lock import command_of, holder_pid
from sync.store.runs import HEARTBEAT_S

#: Seconds without a heartbeat after which a daemon whose writer cannot be asked is taken for
#: dead: three missed beats.
STALE_S = 3 * HEARTBEAT_S


@dataclass(frozen=True)
class Writer:
    """Who writes the mirror now: `known` False when that cannot be asked; else `pid` (None:
    nobody) and what the process is (`command`)."""

    known: bool
    pid: int | None = None
    command: str = ""


def writer_of(where: Path | MirrorTarget) -> Writer:
    """The writer of the mirror at `where` (a file's path, or a target)."""
    target = where if isinstance(where, MirrorTarget) else MirrorTarget(path=where)
    if target.path is not None:
        pid = holder_pid(target.path)
        return Writer(True, pid, command_of(pid) if pid is not None else "")
    assert target.url is not None
    from sync.store.pg.lock import holder_of  # psycopg only for a PostgreSQL mirror

    try:
        holder = holder_of(target.url, target.schema)
    except MirrorError:
        return Writer(False)
    if holder is None:
        return Writer(True)
    return Writer(True, holder.process or -holder.pid, holder.describe())


def daemon_state(mirror: MirrorStore, where: Path | MirrorTarget) -> dict[str, Any]:
    """Whether a daemon holds the mirror now: the writer lock's holder (`writer_of`) and the
    daemon's run record (`sync.store.runs`). `running` with its `pid`, `since` and
    `last_heartbeat`; else `stopped_at` (when the last daemon stopped or was last seen, None
    when none ever ran here) and, when another process holds the mirror, `writer`."""
    run = mirror.runs.last("daemon")
    writer = writer_of(where)
    pid = writer.pid if writer.known else (run.get("pid") if run and _beating(run) else None)
    out: dict[str, Any] = {"running": False, "pid": None, "since": None, "last_heartbeat": None}
    if run is not None and pid is not None and run.get("pid") == pid and run["status"] == "running":
        out.update(
            running=True, pid=pid, since=run["started_at"], last_heartbeat=run.get("seen_at")
        )
        return out
    if pid is not None:
        out["writer"] = {"pid": pid, "command": writer.command}
    if run is not None:
        out["stopped_at"] = run.get("finished_at") or run.get("seen_at") or run["started_at"]
        out["last_status"] = run["status"] if run["status"] != "running" else "interrupted"
    else:
        out["stopped_at"] = None
    return out


def daemon_lines(daemon: dict[str, Any], overdue: list[str]) -> list[str]:
    """`daemon_state` as `ccsync status` prints it."""
    if daemon["running"]:
        return [
            f"daemon: running, pid {daemon['pid']} since {daemon['since']}, last heartbeat "
            f"{daemon['last_heartbeat'] or 'none yet'}"
        ]
    since = daemon.get("stopped_at")
    line = f"daemon: not running since {since}" if since else "daemon: not running (never ran)"
    if since and daemon.get("last_status") == "interrupted":
        line += " (last seen then; it ended without recording it: killed?)"
    if overdue:
        line += f"; jobs waiting for it: {', '.join(overdue)}"
    out = [line]
    writer = daemon.get("writer")
    if writer:
        what = f" (`{writer['command']}`)" if writer.get("command") else ""
        out.append(f"mirror held by pid {writer['pid']}{what}")
    return out


#: What `ccsync status` shows of the last backfill run.
_SHOWN = ("status", "started_at", "finished_at", "error")


def _beating(run: dict[str, Any] | None) -> bool:
    """Whether a daemon's `running` run was seen within `STALE_S`."""
    if run is None or run["status"] != "running":
        return False
    seen = run.get("seen_at") or run.get("started_at")
    return bool(seen) and str(seen) >= iso_ms(time.time() - STALE_S)  # the stamps sort as text


def backfill_state(mirror: MirrorStore, where: Path | MirrorTarget) -> dict[str, Any]:
    """The last backfill run (status, when, its own error), an unfinished one's start, and
    the types it started that no backfill ever completed (the daemon copies those, and only
    those: with no configuration read, status knows no other types)."""
    last = mirror.runs.last("backfill")  # however many daemon starts came after it
    types = mirror.backfills.started_types()
    done = mirror.backfills.completed_types()
    run = None
    if last is not None:
        run = {k: last.get(k) for k in _SHOWN}
        writer = writer_of(where)
        if run["status"] == "running" and writer.known and writer.pid != last.get("pid"):
            run["status"] = "interrupted"  # nobody holds the mirror for it: killed (SIGKILL, OOM)
    return {
        "last_run": run,
        "unfinished_since": _started(mirror),
        "never_completed": [t for t in types if t not in done],
    }


def _started(mirror: MirrorStore) -> str | None:
    """When an unfinished backfill started: the local clock's moment (`STARTED_LOCAL`), not the
    stamps' lower bound kept for its cursors (`STARTED_AT`), which can be a day early."""
    started = mirror.meta.get(STARTED_AT)
    local = mirror.meta.get(STARTED_LOCAL)
    if started is None or not local:
        return started
    try:
        return iso_ms(float(local))
    except ValueError:
        return started


def backfill_lines(backfill: dict[str, Any]) -> list[str]:
    """`backfill_state` as `ccsync status` prints it (nothing before any backfill ran)."""
    last = backfill["last_run"]
    if last is None:
        return []
    when = last["finished_at"] or last["started_at"]
    line = f"backfill: last run {last['status']} ({when})"
    if last.get("error"):
        line += f": {redact_text(last['error'])}"
    out = [line]
    if backfill["unfinished_since"]:
        never = backfill["never_completed"]
        out.append(
            f"  unfinished, started {backfill['unfinished_since']}: `ccsync backfill` resumes "
            + (
                f"it; never completed: {', '.join(never)}"
                if never
                else "it; every type was "
                "completed by an earlier backfill, so the daemon copies none again"
            )
        )
    return out
