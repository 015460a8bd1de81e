"""Reading a mirror file's rows from a test, read-only, while the daemon may be writing it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def query(db: Path, sql: str, *params: object) -> list[sqlite3.Row]:
    """The rows of `sql` on `db` opened read-only (a reader's view: never a lock a writer
    waits on), each by column name or position."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def row(db: Path, table: str, rid: str) -> dict[str, Any] | None:
    """The row `rid` of `table`, or None while it is not there."""
    rows = query(db, f"select * from [{table}] where id = ?", int(rid))
    return dict(rows[0]) if rows else None
