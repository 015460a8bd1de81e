"""The SQLite store and the PostgreSQL one side by side, for the contract tests of the links and
the memberships (`tests/unit/store/pg/test_links.py`, `test_memberships.py`).

A test body takes a `Side` and runs once per store. `side.links` and `side.memberships` are the
store's module with its leading arguments bound (the connection, and the `Schema` or the
schema's name, as each function of either takes them), so `side.links.replace(DEALS, IMAGES, 1,
[5, 6])` calls `sync.store.links.replace(conn, schema, ...)` or `sync.store.pg.links.replace(conn,
SCHEMA, ...)`; the reads by mall, which PostgreSQL keeps in `sync.store.pg.reads`, are reached
under SQLite's names. `page` writes a staged page with the store's own page write (SQLite's as
the unit tests bind it, `tests.support.store_units.write`; PostgreSQL's `ensure_page`, the
change feed's triggers, then `write_page`), and `rows`/`run` take one statement written once for
both, naming tables bare (`?` placeholders).

As in `tests.support.twin_stores`, the PostgreSQL schema has an awkward name that must be quoted,
the code under test runs on a connection whose `search_path` does not reach it (`rows` and `run`
use a second one whose path does), and `public` holds tables named as the mirror's with other
rows (`DECOYS`): a statement that forgot to name its schema fails or reads the wrong rows.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from psycopg import sql

from sync.pipeline.batches import Staged
from sync.store import Mirror, links, memberships, sideloads
from sync.store.pg import changes, reads
from sync.store.pg import links as pg_links
from sync.store.pg import memberships as pg_memberships
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.schema import Schema
from tests.support.store_units import write

#: The PostgreSQL mirror's schema in these tests.
SCHEMA = 'Links "side"'
#: Tables of `public` named as the mirror's, with rows the mirror does not hold.
DECOYS = {
    "deals": "id bigint PRIMARY KEY, title text, updated_at text",
    "stores": "id bigint PRIMARY KEY, updated_at text, mall_id bigint",
    "job_listings": "id bigint PRIMARY KEY, store_id bigint, updated_at text",
    "deals_images": "deals_id bigint, images_id bigint, position bigint",
    "deals_stores": "deals_id bigint, stores_id bigint, position bigint",
    "malls_stores": "malls_id bigint, stores_id bigint, position bigint",
    "malls_deals": "malls_id bigint, deals_id bigint, position bigint",
}
#: The reads of `sync.store.memberships` that PostgreSQL keeps in `sync.store.pg.reads`.
READS = ("count_in_mall", "ids_in_mall", "malls_of", "busiest", "orphans")


class Bound:
    """A store module's functions by name with their leading arguments given (`args`), or the
    function `special` gives for a name."""

    def __init__(
        self, module: ModuleType, args: tuple[Any, ...], special: dict[str, Callable[..., Any]]
    ) -> None:
        self.module = module
        self.args = args
        self.special = special

    def __getattr__(self, name: str) -> Callable[..., Any]:
        found = self.special.get(name)
        return found or functools.partial(getattr(self.module, name), *self.args)


class SQLiteSide:
    """A SQLite mirror opened on a file, written by its own page write."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.mirror = Mirror.open(path)
        self.conn: sqlite3.Connection = self.mirror.conn
        conn, schema = self.conn, self.mirror.schema
        self.links = Bound(
            links,
            (conn, schema),
            {
                name: functools.partial(getattr(links, name), *args)
                for name, args in {
                    "write": (conn,),
                    "mall_deals": (conn,),
                    "ensure": (schema,),
                    "owned": (schema,),
                    "pointing_at": (schema,),
                }.items()
            },
        )
        self.memberships = Bound(
            memberships, (conn,), {"ensure": functools.partial(memberships.ensure, schema)}
        )

    def page(self, *batches: Staged) -> None:
        write(self.conn, self.mirror.schema, list(batches))

    def rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute(statement, params).fetchall()]

    def run(self, statement: str, *params: Any) -> None:
        self.conn.execute(statement, params)

    def notes(self) -> Any:
        """The feed's `LinkNotes` for a write about to be made."""
        return links.feed_notes(self.conn, self.mirror.schema)

    def write_to_one(self, rtype: Any, column: str, values: Any, stamps: Any) -> int:
        return sideloads.write_to_one(self.conn, self.mirror.schema, rtype, column, values, stamps)

    def by_mall(self, type_name: str, ids: list[int]) -> dict[int, list[int]]:
        return self.mirror.table(type_name).by_mall(ids)

    def busiest(self, type_name: str, n: int) -> list[int]:
        return self.mirror.table(type_name).busiest_malls(n)

    def close(self) -> None:
        self.mirror.close()


def _decoys(conn: psycopg.Connection[Any]) -> None:
    """`public`'s tables named as the mirror's, each with a row of ids the tests never use."""
    for name, columns in DECOYS.items():
        table = sql.Identifier("public", name)
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(columns)))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (7000, 7000)").format(table))


class PostgresSide:
    """A PostgreSQL schema with the change feed, written by the PostgreSQL page write."""

    name = "postgres"

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.bare = psycopg.connect(dsn, autocommit=True)
        _decoys(self.conn)
        changes.ensure(self.conn, SCHEMA)
        self.bare.execute("SELECT set_config('search_path', quote_ident(%s), false)", (SCHEMA,))
        self.writer = PageWriter(self.conn, SCHEMA)
        self.links = Bound(pg_links, (self.conn, SCHEMA), {})
        self.memberships = Bound(
            pg_memberships, (self.conn, SCHEMA), {name: self._read(name) for name in READS}
        )

    def _read(self, name: str) -> Callable[..., Any]:
        """`sync.store.pg.reads`' function `name` on a schema read afresh (nothing cached)."""
        return lambda *args, **kwargs: getattr(reads, name)(
            Schema(self.conn, SCHEMA), *args, **kwargs
        )

    def page(self, *batches: Staged) -> None:
        self.writer.ensure_page(batches)
        for b in batches:
            if b.ids:
                changes.create_triggers(self.conn, SCHEMA, b.type, set(self.writer.columns(b.type)))
        self.writer.write_page(batches)

    def rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = self.bare.execute(statement.replace("?", "%s"), params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def run(self, statement: str, *params: Any) -> None:
        self.bare.execute(statement.replace("?", "%s"), params)

    def notes(self) -> Any:
        return pg_links.feed_notes(self.conn, SCHEMA)

    def write_to_one(self, rtype: Any, column: str, values: Any, stamps: Any) -> int:
        return pg_links.write_to_one(self.conn, SCHEMA, rtype, column, values, stamps)

    def by_mall(self, type_name: str, ids: list[int]) -> dict[int, list[int]]:
        return reads.TypeReads(Schema(self.conn, SCHEMA), type_name).by_mall(ids)

    def busiest(self, type_name: str, n: int) -> list[int]:
        return reads.TypeReads(Schema(self.conn, SCHEMA), type_name).busiest_malls(n)

    def close(self) -> None:
        self.bare.close()
        self.conn.close()


Side = SQLiteSide | PostgresSide


def open_side(kind: str, tmp_path: Path, dsn: Callable[[], str]) -> Side:
    """The `kind` store, empty: a file in `tmp_path`, or a fresh database (`dsn()`, asked only
    for PostgreSQL, so a SQLite run starts no server)."""
    return SQLiteSide(tmp_path / "m.db") if kind == "sqlite" else PostgresSide(dsn())
