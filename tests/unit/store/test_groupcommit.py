"""`sync.store.groupcommit`: pages commit per group, a failure takes the group, pragmas follow."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sync.store import Mirror
from sync.store.file import AUTOCHECKPOINT
from sync.store.groupcommit import GroupCommit


def _page(group: GroupCommit, key: str) -> None:
    with group.transaction():
        group.conn.execute("INSERT INTO _sync_meta VALUES (?, 'v')", (key,))
    group.after_page()


def _seen(db: Path) -> list[str]:
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [
            r[0]
            for r in reader.execute("SELECT key FROM _sync_meta WHERE key LIKE 'p%' ORDER BY 1")
        ]
    finally:
        reader.close()


def test_pages_are_seen_only_when_their_group_commits(mirror: Mirror, tmp_path: Path) -> None:
    group = GroupCommit(mirror.conn, (1000, 16384))
    group.start(3, seconds=3600)
    _page(group, "p1")
    _page(group, "p2")
    assert _seen(tmp_path / "m.db") == []
    _page(group, "p3")
    assert _seen(tmp_path / "m.db") == ["p1", "p2", "p3"]
    _page(group, "p4")
    group.end()
    assert _seen(tmp_path / "m.db") == ["p1", "p2", "p3", "p4"]
    _page(group, "p5")  # off again: one commit a page
    assert _seen(tmp_path / "m.db") == ["p1", "p2", "p3", "p4", "p5"]


def test_a_failing_page_rolls_back_its_whole_group(mirror: Mirror, tmp_path: Path) -> None:
    group = GroupCommit(mirror.conn, (1000, 16384))
    group.start(10, seconds=3600)
    _page(group, "p1")
    with pytest.raises(RuntimeError):
        with group.transaction():
            mirror.conn.execute("INSERT INTO _sync_meta VALUES ('p2', 'v')")
            raise RuntimeError("page failed")
    assert not mirror.conn.in_transaction
    _page(group, "p3")
    group.end()
    assert _seen(tmp_path / "m.db") == ["p3"]


def test_litestream_mode_never_checkpoints_even_in_a_bulk_load(mirror: Mirror) -> None:
    """With `checkpoints = "litestream"` (0, 0) the group keeps sync's own checkpoints off."""
    conn = mirror.conn
    group = GroupCommit(conn, AUTOCHECKPOINT["litestream"])
    group.start(5, seconds=2.0)
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    group.end()
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    assert (group.autocheckpoint, group.bulk_autocheckpoint) == (0, 0)
