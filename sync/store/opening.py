"""Opening a mirror named by a `MirrorTarget`: the SQLite file, or the PostgreSQL schema.

The one place that chooses the store: every command and the daemon open their mirror here, and
hold what it returns as a `MirrorStore` (`sync.store.seam`). The PostgreSQL store is imported
only when a target names it, so an SQLite user needs none of the `postgres` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sync.core.errors import MirrorError
from sync.core.target import MirrorTarget
from sync.store.mirror import Mirror
from sync.store.seam import MirrorStore

if TYPE_CHECKING:
    from sync.core.config import CheckpointMode
    from sync.store.pg.lock import ActiveLock

#: Told when `[mirror] url` names PostgreSQL and psycopg is missing.
NO_PSYCOPG = (
    "[mirror] url names a PostgreSQL database, but psycopg is not installed; "
    "install the extra: pip install 'sync[postgres]'"
)


def open_mirror(
    target: MirrorTarget,
    *,
    readonly: bool = False,
    checkpoints: CheckpointMode = "sqlite",
    lock: ActiveLock | None = None,
) -> MirrorStore:
    """Open (a writer: creating if needed) the mirror `target` names; MirrorError names the
    problem and the fix. A PostgreSQL writer holds the mirror's active lock: `lock`, already
    taken (the daemon waits for it as a standby), else one it takes now or fails naming the
    holder. `checkpoints` is SQLite's alone."""
    if target.url is None:
        assert target.path is not None
        return Mirror.open(target.path, readonly=readonly, checkpoints=checkpoints)
    try:
        from sync.store.pg.mirror import PgMirror
    except ImportError as exc:
        if "psycopg" not in str(exc):
            raise
        raise MirrorError(NO_PSYCOPG) from None
    return PgMirror.open(target.url, target.schema, readonly=readonly, lock=lock)
