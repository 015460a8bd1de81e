"""Two stores filled alike, for the contract tests of the PostgreSQL mirror's read parts (#49).

`sqlite_store` opens an SQLite mirror in the test's directory; `postgres_store` makes the same
tables in one schema of a fresh PostgreSQL database. Both take the same staged pages through
`Store.write` (the store's own page write: `sync.store.pagewrite` and its memberships there,
`sync.store.pg.pagewrite.PageWriter` and a membership table of SQLite's shape here) and hand out
the same parts under the same names: the reads module and the schema it takes, one type's read
handle (`Mirror.table` / `TypeReads`), a `Listing`. A test module's `store` fixture, parametrized
`sqlite`/`postgres`, yields one of them, so one test body asserts the same answers of both.

The PostgreSQL schema has an awkward name (`SCHEMA`, quoted wherever it is named) and the
session's `search_path` does not reach it; tables of the same names in `public` hold other rows
(`DECOYS`), so a statement that forgot to name its schema reads the wrong rows and fails. The
membership tables (`malls_<type>`) are made here with SQLite's names and columns: their writes
are another part of the PostgreSQL mirror's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg import sql

from sync.store import Mirror, memberships
from sync.store import reads as sqlite_reads
from sync.store.listing import Listing as SqliteListing
from sync.store.pg import reads as pg_reads
from sync.store.pg.listing import Listing as PgListing
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.reads import TypeReads
from sync.store.pg.schema import Schema as PgSchema
from tests.support.store_units import staged, write

#: The PostgreSQL mirror's schema in these tests.
SCHEMA = 'Mirror "twin"'
#: Tables of `public` named as the mirror's, holding rows the mirror does not.
DECOYS = ("deals", "stores", "tags", "malls_stores")


@dataclass
class Store:
    """One store's read parts, and what a test needs behind them."""

    kind: str
    #: The connection the parts read on (sqlite3 or psycopg, autocommit).
    conn: Any
    #: `sync.store.reads` or `sync.store.pg.reads`, and the schema its functions take.
    reads: ModuleType
    schema: Any
    #: Write one page of `type` (resources as served), listed by a mall when given.
    write: Callable[..., None]
    #: One type's read handle.
    table: Callable[[str], Any]
    #: `Listing(conn, table, mall_id, name)` of this store.
    listing: Callable[[str, int | None, str], Any]
    #: One statement on the mirror's tables, named bare, with `?` placeholders: its rows.
    raw: Callable[..., list[tuple[Any, ...]]]
    #: The names of the connection's temporary tables.
    temp_tables: Callable[[], set[str]]


def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn: sqlite3.Connection = mirror.conn

    def write_page(
        type_name: str, resources: Sequence[dict[str, Any]], mall: int | None = None
    ) -> None:
        write(conn, mirror.schema, staged(type_name, resources, mall_id=mall))

    def raw(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(statement, params).fetchall()]

    def temp_tables() -> set[str]:
        return {r[0] for r in raw("SELECT name FROM sqlite_temp_master WHERE type = 'table'")}

    try:
        yield Store(
            "sqlite",
            conn,
            sqlite_reads,
            mirror.schema,
            write_page,
            mirror.table,
            lambda t, m, n: SqliteListing(conn, t, m, n),
            raw,
            temp_tables,
        )
    finally:
        mirror.close()


def ensure_memberships(conn: psycopg.Connection[Any], schema: str, type_name: str) -> None:
    """`malls_<type>` as SQLite makes it (`sync.store.schema.link_sql`): the two keys and
    `position`, keyed by the pair, indexed by the row (no foreign keys: PostgreSQL would enforce
    them, and a membership may name a mall the mirror does not hold)."""
    mall, row = memberships.columns(type_name)
    table = memberships.table(type_name)
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ({} bigint NOT NULL, {} bigint NOT NULL,"
            " position bigint, PRIMARY KEY ({}, {}))"
        ).format(
            sql.Identifier(schema, table),
            sql.Identifier(mall),
            sql.Identifier(row),
            sql.Identifier(mall),
            sql.Identifier(row),
        )
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
            sql.Identifier(f"idx_{table}_{row}"), sql.Identifier(schema, table), sql.Identifier(row)
        )
    )


def _decoys(conn: psycopg.Connection[Any]) -> None:
    """`public`'s tables named as the mirror's, each with rows of ids the tests never use."""
    for name in DECOYS:
        cols = (
            "malls_id bigint, stores_id bigint, position bigint"
            if name.startswith("malls_")
            else "id bigint PRIMARY KEY, updated_at text, mall_id bigint"
        )
        conn.execute(
            sql.SQL("CREATE TABLE public.{} ({})").format(sql.Identifier(name), sql.SQL(cols))
        )
        first = "malls_id, stores_id" if name.startswith("malls_") else "id, mall_id"
        conn.execute(
            sql.SQL("INSERT INTO public.{} ({}) SELECT g, g FROM generate_series(1, 700) g").format(
                sql.Identifier(name), sql.SQL(first)
            )
        )


def postgres_store(dsn: str) -> Iterator[Store]:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        psycopg.connect(dsn, autocommit=True) as bare,
    ):
        _decoys(conn)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        bare.execute("SELECT set_config('search_path', quote_ident(%s), false)", (SCHEMA,))
        schema = PgSchema(conn, SCHEMA)
        writer = PageWriter(conn, SCHEMA)

        def members(type_name: str) -> None:
            ensure_memberships(conn, SCHEMA, type_name)
            schema.forget(memberships.table(type_name))

        def write_page(
            type_name: str, resources: Sequence[dict[str, Any]], mall: int | None = None
        ) -> None:
            batches = staged(type_name, resources, mall_id=mall)
            for b in batches:
                writer.ensure(b)
            first = batches[0]
            pairs: list[tuple[int, int]] = []
            if first.rtype.level == "mall" and "mall_id" in first.columns:
                members(type_name)
                pos = first.columns.index("mall_id") + 1
                pairs = [(r[pos], r[0]) for r in first.rows if r[pos] is not None]
            with conn.transaction():
                for b in batches:
                    writer.upsert(b)
                    schema.forget(b.type)
                if pairs:
                    mall_col, row_col = memberships.columns(type_name)
                    conn.cursor().executemany(
                        sql.SQL(
                            "INSERT INTO {} ({}, {}, position) VALUES (%s, %s, 0)"
                            " ON CONFLICT DO NOTHING"
                        ).format(
                            sql.Identifier(SCHEMA, memberships.table(type_name)),
                            sql.Identifier(mall_col),
                            sql.Identifier(row_col),
                        ),
                        pairs,
                    )

        def raw(statement: str, *params: Any) -> list[tuple[Any, ...]]:
            cur = bare.execute(statement.replace("?", "%s"), params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

        def temp_tables() -> set[str]:
            rows = conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = pg_my_temp_schema()"
                " AND relkind = 'r'"
            ).fetchall()
            return {r[0] for r in rows}

        yield Store(
            "postgres",
            conn,
            pg_reads,
            schema,
            write_page,
            lambda name: TypeReads(schema, name, members),
            lambda t, m, n: PgListing(conn, t, m, n, SCHEMA),
            raw,
            temp_tables,
        )
