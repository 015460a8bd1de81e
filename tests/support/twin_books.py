"""Two stores with their books, for the contract tests of the PostgreSQL mirror's parts that keep
them (#49): backfill checkpoints, type statuses, value notes, scripts and sideloads.

`sqlite_twin` and `postgres_twin` build on `tests.support.twin_stores` (the same staged pages
written into an SQLite mirror and into one PostgreSQL schema, `SCHEMA`, with its decoys in
`public`) and add what these parts stand on: the bookkeeping parts of each store (`meta`,
`cursors`, `runs`), a transaction the block's writes are made in (`atomic`: SQLite's
`write_transaction`, PostgreSQL's `conn.transaction()`), and a page written with its included
resources and their links (`write`: SQLite's own page write, `tests.support.store_units.write`;
PostgreSQL's, `PageWriter.ensure_page` then `write_page`). The PostgreSQL schema gets its books
from the parts' own `ensure_...` functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from sync.store import runs as sqlite_runs
from sync.store.meta import Cursors as SqliteCursors
from sync.store.meta import Meta as SqliteMeta
from sync.store.pg import bookkeeping
from sync.store.pg.backfills import ensure_backfills
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.scripts import ensure_scripts
from sync.store.pg.status import ensure_status
from sync.store.pg.values import ensure_values
from sync.store.transaction import write_transaction
from tests.support.store_units import staged
from tests.support.store_units import write as sqlite_write
from tests.support.twin_stores import SCHEMA, Store, postgres_store, sqlite_store

__all__ = ["SCHEMA", "Twin", "postgres_twin", "sqlite_twin"]

Resources = Sequence[dict[str, Any]]


@dataclass
class Twin:
    """One store (`twin_stores.Store`: its connection, schema, reads, `raw`) with its books."""

    store: Store
    meta: Any
    cursors: Any
    runs: Any
    #: A transaction the block's writes are made in, committed at its end, rolled back by an
    #: exception (which goes on).
    atomic: Callable[[], contextlib.AbstractContextManager[Any]]
    #: Write one page of `type` (resources as served) with its included resources and links.
    write: Callable[[str, Resources, Resources], None]

    @property
    def kind(self) -> str:
        return self.store.kind

    @property
    def conn(self) -> Any:
        return self.store.conn

    def raw(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """One statement on the store's tables, named bare, with `?` placeholders: its rows."""
        return self.store.raw(statement, *params)


def sqlite_twin(tmp_path: Path) -> Iterator[Twin]:
    with contextlib.closing(sqlite_store(tmp_path)) as stores:
        store = next(stores)
        conn = store.conn

        def write(type_name: str, resources: Resources, included: Resources = ()) -> None:
            sqlite_write(conn, store.schema, staged(type_name, resources, included))

        yield Twin(
            store,
            SqliteMeta(conn),
            SqliteCursors(conn),
            sqlite_runs.Runs(conn),
            lambda: write_transaction(conn),
            write,
        )


def postgres_twin(dsn: str) -> Iterator[Twin]:
    with contextlib.closing(postgres_store(dsn)) as stores:
        store = next(stores)
        conn: psycopg.Connection[Any] = store.conn
        for ensure in (ensure_backfills, ensure_status, ensure_values, ensure_scripts):
            ensure(conn, SCHEMA)
        writer = PageWriter(conn, SCHEMA)

        def write(type_name: str, resources: Resources, included: Resources = ()) -> None:
            batches = staged(type_name, resources, included)
            writer.ensure_page(batches)
            for b in batches:
                store.schema.forget(b.type)
                for lt in b.rtype.link_tables:
                    store.schema.forget(lt.table)
            writer.write_page(batches)

        yield Twin(
            store,
            bookkeeping.Meta(conn, SCHEMA),
            bookkeeping.Cursors(conn, SCHEMA),
            bookkeeping.Runs(conn, SCHEMA),
            conn.transaction,
            write,
        )


#: SQLite's declared type -> the type PostgreSQL's column has.
AFFINITY = {"INTEGER": "bigint", "TEXT": "text", "REAL": "double precision"}


def shapes(
    conn: psycopg.Connection[Any], schema: str, lite: Any, tables: Sequence[str]
) -> dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]], set[str]]]:
    """Per table: its columns (name, type) in SQLite (`lite`, a connection to a mirror) and in
    PostgreSQL (`schema`) in their order, SQLite's types as PostgreSQL's (`AFFINITY`), and the
    PostgreSQL columns compared byte by byte (collation C)."""
    out = {}
    for table in tables:
        sqlite_cols = [(r[1], AFFINITY[r[2]]) for r in lite.execute(f"PRAGMA table_info({table})")]
        pg = conn.execute(
            "SELECT column_name, data_type, collation_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        ).fetchall()
        out[table] = (
            sqlite_cols,
            [(name, kind) for name, kind, _ in pg],
            {name for name, _, coll in pg if coll == "C"},
        )
    return out
