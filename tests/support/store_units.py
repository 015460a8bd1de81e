"""For the unit tests of `sync.store`'s modules: a page staged and bound by the store's own parts,
and an open mirror as the parts that take one (`sync.store.opened.OpenMirror`) see it.

The unit tests take an open mirror's connection and schema only (`Mirror.open(...).conn`,
`.schema`), and reach every module through its own functions: `write` binds a staged page the way
the page write does (tombstones first, then the guarded upsert, links and memberships, in one
transaction), and `Opened` is the narrow shape `indexes` and `migrations` take.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sync.model import catalogue
from sync.pipeline.batches import Staged
from sync.pipeline.staging import stage_resources
from sync.store.deletions import Deletions, SqliteTombstones
from sync.store.groupcommit import GroupCommit
from sync.store.meta import Meta
from sync.store.pagewrite import PageWriter
from sync.store.schema import Schema
from sync.store.transaction import write_transaction


def staged(
    type_name: str,
    resources: Sequence[dict[str, Any]],
    included: Sequence[dict[str, Any]] = (),
    mall_id: int | None = None,
) -> list[Staged]:
    """One page of `type_name` staged as the jobs stage it (`sync.pipeline.staging`)."""
    return stage_resources(catalogue.TYPES[type_name], resources, included, mall_id)


def write(conn: sqlite3.Connection, schema: Schema, batches: list[Staged]) -> PageWriter:
    """Bind a staged page with the store's own parts, in one transaction; the writer used."""
    writer = PageWriter(conn, schema)
    deletions = Deletions(SqliteTombstones(conn, schema))
    writer.ensure_schema(batches)
    with write_transaction(conn):
        for b in batches:
            deletions.drop_tombstoned(b)
            writer.write(b)
        writer.write_memberships(batches[0])
    return writer


def rows(conn: sqlite3.Connection, sql: str, *params: object) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]


class Opened:
    """An open mirror as `sync.store.opened.OpenMirror` describes it, over a connection: its
    `meta` and `group` the store's own parts."""

    def __init__(self, conn: sqlite3.Connection, path: Path, schema: Schema) -> None:
        self.conn = conn
        self.path = path
        self.schema = schema
        self.meta = Meta(conn)
        self.group = GroupCommit(conn, (1000, 0))
