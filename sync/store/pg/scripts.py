"""The PostgreSQL mirror's `meta_scripts`: each type's `meta.scripts`, by position, as served.

Issue #49: the counterpart of the SQLite mirror's (`sync.store.scripts`: read its docstring
first). When a list is written, how a list that is not one or an item that is not an object is
refused, which script keeps when it was first seen, and the memo of the bytes each type's list
last came as are `sync.store.scripts.Scripts`'s, written once for both stores: it holds a
store's statements, here `PgScripts` (`Scripts(PgScripts(conn, schema))`, where SQLite's mirror
holds `Scripts(SqliteScripts(conn))`). Held to it by the contract tests of
`tests/unit/store/pg/test_scripts.py`. Not wired into `Mirror` yet.

**Table.** `meta_scripts` with SQLite's columns, keyed by (type, position), in one schema
(`SCHEMA` unless told), made by `ensure_scripts`. The type and the stamps are text
`COLLATE "C"`, `position` `bigint`; `script_type` and `content` are text as SQLite keeps them
(a value that is not a string is its JSON text, `sync.store.scripts._text`), so a website's
`SELECT script_type, content FROM meta_scripts WHERE type = 'deals' ORDER BY position` reads
the same from both mirrors.

**Transactions.** `write` runs inside the caller's transaction, as in SQLite: a page's scripts
commit or roll back with its rows, and the caller calls `forget` after a rollback. Replacing a
type's rows (a delete, then the inserts) is atomic on its own too (`conn.transaction()`, a
savepoint inside the caller's), so a connection in autocommit never shows a reader the list
half-written.

**Differences.** The bookkeeping's (`sync.store.pg.bookkeeping`): a NUL character in a script's
type or content is kept as U+FFFD, and the list served is compared with the one held in that
form (`PgScripts.kept`), so a list with NUL served again is not rewritten.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.store.pg.bookkeeping import KEY, SCHEMA, Tables, create_tables, no_nul, statement
from sync.store.scripts import SAME_FOR, Held, Scripts

__all__ = ["SAME_FOR", "PgScripts", "Scripts", "ensure_scripts"]

SCRIPTS = "meta_scripts"

#: The table of this part, as `sync.store.pg.bookkeeping.TABLES` describes its own.
TABLES: Tables = {
    SCRIPTS: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("channel", "text"),
            ("position", "bigint NOT NULL"),
            ("script_type", "text"),
            ("content", "text"),
            ("first_seen_at", KEY),
            ("last_seen_at", KEY),
        ),
        ("type", "position"),
    ),
}


def ensure_scripts(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema` and `meta_scripts` where missing, in one transaction
    (`sync.store.pg.bookkeeping.create_tables`); an existing table is kept."""
    create_tables(conn, schema, TABLES)


class PgScripts:
    """`sync.store.scripts.ScriptBook` in one PostgreSQL schema: `Scripts(PgScripts(conn))` is
    the counterpart of the SQLite mirror's `Scripts(SqliteScripts(conn))`."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self.conn = conn
        self.schema = schema

        def q(template: str) -> sql.Composed:
            return statement(schema, SCRIPTS, template, TABLES)

        self._select = q(
            "SELECT {script_type}, {content}, {first_seen_at} FROM {t} WHERE {type} = %s "
            "ORDER BY {position}"
        )
        self._seen_again = q("UPDATE {t} SET {last_seen_at} = %s WHERE {type} = %s")
        self._delete = q("DELETE FROM {t} WHERE {type} = %s")
        self._insert = q(
            "INSERT INTO {t} ({type}, {channel}, {position}, {script_type}, {content}, "
            "{first_seen_at}, {last_seen_at}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
        )

    def kept(self, value: str | None) -> str | None:
        """NUL as U+FFFD: PostgreSQL text cannot hold one."""
        return None if value is None else no_nul(value)

    def held(self, type_name: str) -> list[Held]:
        cur = self.conn.cursor(row_factory=tuple_row)
        return cur.execute(self._select, (type_name,)).fetchall()

    def touch(self, type_name: str, stamp: str) -> None:
        self.conn.execute(self._seen_again, (stamp, type_name))

    def replace(self, type_name: str, rows: list[tuple[Any, ...]]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(self._delete, (type_name,))
            if rows:
                cur.executemany(self._insert, rows)
