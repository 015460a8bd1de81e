"""Who writes a PostgreSQL mirror and who waits, for `ccsync status` (issue #49, item 3).

A PostgreSQL mirror's daemons (two hosts in production) share it through its active lock
(`sync.store.pg.lock`): the holder is the active daemon, and every standby holds the standbys'
key while it waits. Both are the server's word, asked of `pg_locks` and `pg_stat_activity`
now, so a daemon killed with SIGKILL is gone from them as soon as the server ends its session;
nothing is written to the mirror. An SQLite mirror has no standby: `sync.readers.running` says
who holds its file.
"""

from __future__ import annotations

from typing import Any

from sync.core.errors import MirrorError
from sync.core.target import MirrorTarget


def roles(target: MirrorTarget) -> dict[str, Any]:
    """`{"active": <holder> or None, "standbys": [<standby>...]}`, each described on one line
    (`Holder.describe`: application name `ccsync@host:pid`, backend pid, address, since);
    `{"error": ...}` (one line, no password) when the server cannot be asked."""
    assert target.url is not None, "an SQLite mirror has no active lock"
    from sync.store.pg.lock import ActiveLock  # psycopg: a PostgreSQL mirror's only

    lock = ActiveLock(target.url, target.schema, name="ccsync status")
    try:
        holder = lock.holder()
        standbys = lock.standbys()
    except MirrorError as exc:
        return {"active": None, "standbys": [], "error": str(exc)}
    finally:
        lock.release()
    return {
        "active": holder.describe() if holder is not None else None,
        "standbys": [s.describe() for s in standbys],
    }


def role_lines(found: dict[str, Any]) -> list[str]:
    """`roles` as the lines `ccsync status` prints."""
    if found.get("error"):
        return [f"daemons: cannot be asked: {found['error']}"]
    active = found["active"] or "none (no daemon holds the mirror's active lock)"
    lines = [f"active daemon: {active}"]
    standbys = found["standbys"]
    if standbys:
        lines += [f"standby daemon (waiting to take over): {s}" for s in standbys]
    else:
        lines.append("standby daemon: none waiting")
    return lines
