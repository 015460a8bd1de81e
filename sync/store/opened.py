"""What the mirror's parts that build or repair the whole file read of it: an open mirror.

`sync.store.indexes` (the end phase) and `sync.store.migrations` (repairs of a file an older sync
wrote) work on the file as a whole, and `Mirror` runs them; they take this narrower shape rather
than the facade, so neither imports the module that imports it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from sync.store.schema import Schema


class OpenMirror(Protocol):
    """An open mirror file (`sync.store.Mirror` is one): its connection, path and schema."""

    conn: sqlite3.Connection
    path: Path
    schema: Schema

    @property
    def autocheckpoint(self) -> int:
        """The writer's `PRAGMA wal_autocheckpoint` outside a bulk load."""
        ...

    def has_table(self, table: str) -> bool: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str | None) -> None: ...
