"""Readers on other machines: the mirror replicated with Litestream, end to end.

`[mirror] checkpoints = "litestream"` leaves the WAL's checkpoints to Litestream (sync runs
none, the bulk load included), as Litestream's guide asks of applications. The end-to-end test
runs the real pieces: the emulator upstream, `ccsync run` as a subprocess, `litestream
replicate` copying the mirror to a file replica, and a follower (`litestream restore -f`)
keeping a copy in another directory. Through a stream of upstream changes, a `ccsync backfill
--restart` (the bulk load) and a `ccsync reconcile`, the follower must end equal to the
writer's mirror table by table; the lag from an upstream change to the row on the follower is
printed as p50/p99 (README "Scaling out" quotes it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sync.config import CheckpointMode
from sync.store import Mirror

#: A 4 KiB row: each commit of 100 of them adds ~100 WAL frames.
_ROW = "x" * 4000


def _wal_bytes_after_writing(db: Path, checkpoints: CheckpointMode) -> int:
    """Write ~3,000 WAL frames through the writer's connection in 30 commits; the WAL's size."""
    mirror = Mirror.open(db, checkpoints=checkpoints)
    try:
        mirror.conn.execute("CREATE TABLE scratch (v TEXT)")
        for _ in range(30):
            mirror.conn.execute("BEGIN")
            mirror.conn.executemany("INSERT INTO scratch VALUES (?)", [(_ROW,)] * 100)
            mirror.conn.execute("COMMIT")
        return os.path.getsize(f"{db}-wal")
    finally:
        mirror.close()


def test_litestream_mode_never_checkpoints_and_sqlite_mode_does(tmp_path: Path) -> None:
    """With checkpoints = "litestream" no commit of sync's checkpoints the WAL (it grows past
    3,000 frames; Litestream checkpoints once it has copied them); with "sqlite" SQLite's own
    PASSIVE checkpoint starts the WAL over at 1,000 frames."""
    frame = 4096 + 24
    ours = _wal_bytes_after_writing(tmp_path / "litestream.db", "litestream")
    assert ours > 2900 * frame, ours
    theirs = _wal_bytes_after_writing(tmp_path / "sqlite.db", "sqlite")
    assert theirs < 1200 * frame, theirs


@pytest.mark.parametrize(
    ("checkpoints", "normal", "bulk"), [("sqlite", 1000, 16384), ("litestream", 0, 0)]
)
def test_autocheckpoint_pragma_per_mode(
    tmp_path: Path, checkpoints: CheckpointMode, normal: int, bulk: int
) -> None:
    """The pragma on the writer's connection: at open, during a bulk load, and after it."""
    mirror = Mirror.open(tmp_path / "m.db", checkpoints=checkpoints)
    try:
        pragma = "PRAGMA wal_autocheckpoint"
        assert mirror.conn.execute(pragma).fetchone()[0] == normal
        mirror.start_group_commit(256)
        assert mirror.conn.execute(pragma).fetchone()[0] == bulk
        mirror.end_group_commit()
        assert mirror.conn.execute(pragma).fetchone()[0] == normal
    finally:
        mirror.close()
