"""Reading a mirror file's rows from a test, read-only, while the daemon may be writing it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def row(db: Path, table: str, rid: str) -> dict[str, Any] | None:
    """The row `rid` of `table`, or None while it is not there."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        r = conn.execute(f"select * from [{table}] where id = ?", (int(rid),)).fetchone()
        return dict(r) if r else None
    finally:
        conn.close()
