"""The SQLite store and the PostgreSQL one side by side, for the contract tests of the links and
the memberships (`tests/unit/store/pg/test_links.py`, `test_memberships.py`).

A test body takes a `Side` and runs once per store. `side.links` and `side.memberships` are the
store's module with its leading arguments bound (the connection, and the `Schema` or the
schema's name, as each function of either takes them), so `side.links.replace(DEALS, IMAGES, 1,
[5, 6])` calls `sync.store.links.replace(conn, schema, ...)` or `sync.store.pg.links.replace(conn,
"ccsync", ...)`. `page` writes a staged page with the store's own page write (SQLite's as the unit
tests bind it, `tests.support.store_units.write`; PostgreSQL's `ensure_page`, the change feed's
triggers, then `write_page`), and `rows`/`run` take one statement written once for both (`?`
placeholders; the PostgreSQL side's `search_path` is the mirror's schema). The calls a mirror
makes through its table handle (`TypeTable.by_mall`, `.busiest_malls`) are methods here.
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
from sync.store.pg import changes
from sync.store.pg import links as pg_links
from sync.store.pg import memberships as pg_memberships
from sync.store.pg.pagewrite import PageWriter
from tests.support.store_units import write

SCHEMA = "ccsync"


class Bound:
    """A store module's functions by name, with their leading arguments given: `args`, or those
    `special` names for a function that takes others."""

    def __init__(
        self, module: ModuleType, args: tuple[Any, ...], special: dict[str, tuple[Any, ...]]
    ) -> None:
        self.module = module
        self.args = args
        self.special = special

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return functools.partial(getattr(self.module, name), *self.special.get(name, self.args))


class SQLiteSide:
    """A SQLite mirror opened on a file, written by its own page write."""

    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.mirror = Mirror.open(path)
        self.conn: sqlite3.Connection = self.mirror.conn
        schema = self.mirror.schema
        self.links = Bound(
            links,
            (self.conn, schema),
            {"write": (self.conn,), "mall_deals": (self.conn,), "ensure": (schema,)}
            | {name: (schema,) for name in ("owned", "pointing_at")},
        )
        self.memberships = Bound(memberships, (self.conn,), {"ensure": (schema,)})

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


class PostgresSide:
    """A PostgreSQL schema with the change feed, written by the PostgreSQL page write."""

    name = "postgres"

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        changes.ensure(self.conn, SCHEMA)
        self.conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(SCHEMA)))
        self.writer = PageWriter(self.conn, SCHEMA)
        self.links = Bound(pg_links, (self.conn, SCHEMA), {})
        self.memberships = Bound(pg_memberships, (self.conn, SCHEMA), {})

    def page(self, *batches: Staged) -> None:
        self.writer.ensure_page(batches)
        for b in batches:
            if b.ids:
                changes.create_triggers(self.conn, SCHEMA, b.type, set(self.writer.columns(b.type)))
        self.writer.write_page(batches)

    def rows(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(statement.replace("?", "%s"), params)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def run(self, statement: str, *params: Any) -> None:
        self.conn.execute(statement.replace("?", "%s"), params)

    def notes(self) -> Any:
        return pg_links.feed_notes(self.conn, SCHEMA)

    def write_to_one(self, rtype: Any, column: str, values: Any, stamps: Any) -> int:
        return pg_links.write_to_one(self.conn, SCHEMA, rtype, column, values, stamps)

    def by_mall(self, type_name: str, ids: list[int]) -> dict[int, list[int]]:
        return pg_memberships.by_mall(self.conn, SCHEMA, type_name, ids)

    def busiest(self, type_name: str, n: int) -> list[int]:
        return pg_memberships.busiest(self.conn, SCHEMA, type_name, n)

    def close(self) -> None:
        self.conn.close()


Side = SQLiteSide | PostgresSide


def open_side(kind: str, tmp_path: Path, dsn: Callable[[], str]) -> Side:
    """The `kind` store, empty: a file in `tmp_path`, or a fresh database (`dsn()`, asked only
    for PostgreSQL, so a SQLite run starts no server)."""
    return SQLiteSide(tmp_path / "m.db") if kind == "sqlite" else PostgresSide(dsn())
