"""Raw statements and rolled-back blocks on either store's connection, for the PostgreSQL
store's contract tests: a test writes its check once in SQLite's dialect (`?` placeholders,
bare table names) and runs it on both.

`sqlite_rows`/`pg_rows` run one statement and return its rows (`pg_rows` qualifies the table
names `tables` matches with the test schema and turns `?` into `%s`); `sqlite_rolled_back`/
`pg_rolled_back` give a block whose writes are rolled back at its end.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql

#: One statement's rows.
Rows = Callable[..., list[tuple[Any, ...]]]
#: A block whose writes are rolled back at its end.
RolledBack = Callable[[], contextlib.AbstractContextManager[None]]


def sqlite_rows(conn: sqlite3.Connection) -> Rows:
    def rows(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(statement, params).fetchall()]

    return rows


def sqlite_rolled_back(conn: sqlite3.Connection) -> RolledBack:
    @contextlib.contextmanager
    def rolled_back() -> Iterator[None]:
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")

    return rolled_back


def pg_statement(conn: psycopg.Connection[Any], schema: str, tables: str, statement: str) -> str:
    """`statement` with the table names `tables` (a regular expression) qualified by `schema`,
    and `?` placeholders as psycopg's `%s`."""
    qualified = sql.Identifier(schema).as_string(conn)
    return re.sub(rf"\b({tables})\b", rf"{qualified}.\1", statement).replace("?", "%s")


def pg_run(
    conn: psycopg.Connection[Any], schema: str, tables: str, statement: str, params: Any = ()
) -> list[tuple[Any, ...]]:
    """One statement in SQLite's dialect on PostgreSQL (`pg_statement`): its rows, if any."""
    cur = conn.execute(pg_statement(conn, schema, tables, statement), params)
    return [tuple(r) for r in cur.fetchall()] if cur.description else []


def pg_rows(conn: psycopg.Connection[Any], schema: str, tables: str) -> Rows:
    return lambda statement, *params: pg_run(conn, schema, tables, statement, params)


def pg_rolled_back(conn: psycopg.Connection[Any]) -> RolledBack:
    @contextlib.contextmanager
    def rolled_back() -> Iterator[None]:
        with conn.transaction(force_rollback=True):
            yield

    return rolled_back
