"""What the mirror's parts that build or repair the whole file read of it: an open mirror.

`sync.store.indexes` (the end phase) and `sync.store.migrations` (repairs of a file an older sync
wrote) work on the file as a whole, and `Mirror` runs them; they take this narrower shape (the
file's connection, path, schema, meta and group commit) rather than the facade, so neither
imports the module that imports it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from sync.store.groupcommit import GroupCommit
from sync.store.meta import Meta
from sync.store.schema import Schema


class OpenMirror(Protocol):
    """An open mirror file (`sync.store.Mirror` is one): its connection, path, schema, meta
    and group commit (whose `autocheckpoint` a side build of the full-text indexes keeps)."""

    conn: sqlite3.Connection
    path: Path
    schema: Schema
    meta: Meta
    group: GroupCommit
