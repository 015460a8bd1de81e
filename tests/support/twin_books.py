"""Two stores with their books, for the contract tests of the PostgreSQL mirror's parts that keep
them (#49): backfill checkpoints, type statuses, value notes, scripts and sideloads.

`sqlite_twin` and `postgres_twin` build on `tests.support.twin_stores` (the same staged pages
written into an SQLite mirror and into one PostgreSQL schema, `SCHEMA`, with its decoys in
`public`) and add what these parts stand on: the bookkeeping parts of each store (`meta`,
`cursors`, `runs`), a transaction the block's writes are made in (`atomic`: SQLite's
`write_transaction`, PostgreSQL's `conn.transaction()`), and a page written with its included
resources and their links (`write`: SQLite's own page write, `tests.support.store_units.write`;
in PostgreSQL the page write's upsert and link tables made and filled here with SQLite's names
and columns, since writing links is another part of the PostgreSQL mirror). The PostgreSQL
schema gets its books from the parts' own `ensure_...` functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from sync.pipeline.batches import Staged
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


def ensure_links(conn: psycopg.Connection[Any], schema: str, b: Staged) -> None:
    """The link tables of `b`'s to-many relationships as SQLite makes them
    (`sync.store.schema.link_sql`): owner and related keys `NOT NULL`, `position`, keyed by the
    pair (no foreign keys: a link may name a row the mirror does not hold)."""
    for rel in b.rtype.relationships:
        if rel.to_one or rel.name not in b.links:
            continue
        owner, other = rel.link_columns(b.type)
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ({o} bigint NOT NULL, {r} bigint NOT NULL,"
                " position bigint, PRIMARY KEY ({o}, {r}))"
            ).format(
                sql.Identifier(schema, rel.link_table(b.type)),
                o=sql.Identifier(owner),
                r=sql.Identifier(other),
            )
        )


def _write_links(conn: psycopg.Connection[Any], schema: str, b: Staged) -> None:
    """The links of `b`'s owners become what the page says (each owner's rows replaced)."""
    for rel in b.rtype.relationships:
        pairs = b.links.get(rel.name)
        if rel.to_one or not pairs:
            continue
        table = sql.Identifier(schema, rel.link_table(b.type))
        owner, other = (sql.Identifier(c) for c in rel.link_columns(b.type))
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE {} = ANY(%s::bigint[])").format(table, owner),
            ([rid for rid, _ in pairs],),
        )
        conn.cursor().executemany(
            sql.SQL(
                "INSERT INTO {} ({}, {}, position) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
            ).format(table, owner, other),
            [(rid, rel_id, pos) for rid, related in pairs for pos, rel_id in enumerate(related)],
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
            for b in batches:
                writer.ensure(b)
                ensure_links(conn, SCHEMA, b)
                store.schema.forget(b.type)
                for rel in b.rtype.relationships:
                    store.schema.forget(rel.link_table(b.type))
            with conn.transaction():
                for b in batches:
                    writer.upsert(b)
                    _write_links(conn, SCHEMA, b)

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
