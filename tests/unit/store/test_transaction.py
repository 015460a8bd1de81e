"""`sync.store.transaction`: a write block is all or nothing, takes the write lock first, nests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sync.store import Mirror
from sync.store.transaction import write_transaction


def _values(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM _sync_meta WHERE key LIKE 't%' ORDER BY 1")]


def test_a_failing_block_leaves_none_of_its_writes(mirror: Mirror) -> None:
    conn = mirror.conn
    with pytest.raises(RuntimeError, match="boom"):
        with write_transaction(conn):
            conn.execute("INSERT INTO _sync_meta VALUES ('t1', 'a')")
            conn.execute("INSERT INTO _sync_meta VALUES ('t2', 'b')")
            raise RuntimeError("boom")
    assert _values(conn) == []
    assert not conn.in_transaction
    with write_transaction(conn):
        conn.execute("INSERT INTO _sync_meta VALUES ('t3', 'c')")
    assert _values(conn) == ["t3"]


def test_a_nested_block_undoes_only_itself(mirror: Mirror) -> None:
    conn = mirror.conn
    conn.execute("BEGIN")
    conn.execute("INSERT INTO _sync_meta VALUES ('t1', 'outer')")
    with pytest.raises(ValueError):
        with write_transaction(conn):
            conn.execute("INSERT INTO _sync_meta VALUES ('t2', 'inner')")
            raise ValueError
    assert conn.in_transaction  # the outer transaction goes on
    with write_transaction(conn):
        conn.execute("INSERT INTO _sync_meta VALUES ('t3', 'inner')")
    conn.execute("COMMIT")
    assert _values(conn) == ["t1", "t3"]


def test_the_block_holds_the_write_lock_from_its_start(mirror: Mirror, tmp_path: Path) -> None:
    """BEGIN IMMEDIATE: another connection cannot write even before the block's first write."""
    other = sqlite3.connect(tmp_path / "m.db", timeout=0, isolation_level=None)
    try:
        with write_transaction(mirror.conn):
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("INSERT INTO _sync_meta VALUES ('t9', 'x')")
        other.execute("INSERT INTO _sync_meta VALUES ('t9', 'x')")
    finally:
        other.close()
    assert _values(mirror.conn) == ["t9"]
