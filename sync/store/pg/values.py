"""The PostgreSQL mirror's notes of misfit values: `_sync_refusals` and `_sync_coercions`.

Issue #49: the counterpart of the SQLite mirror's (`sync.store.values`: read its docstring
first). What is logged, counted, told (`on_values`) and forgotten, and when, is
`sync.store.values.ValueNotes`'s, written once for both stores: it holds a store's statements,
here `PgValues` (`ValueNotes(PgValues(conn, schema))`, where SQLite's mirror holds
`ValueNotes(SqliteValues(conn))`), and the rows kept (values redacted) are built by that
module's functions. Held to it by the contract tests of `tests/unit/store/pg/test_values.py`.
Not wired into `Mirror` yet.

**Tables.** SQLite's names and columns (`sync.store.schema.BOOKKEEPING`), in one schema
(`SCHEMA` unless told), made by `ensure_values`. Types, attributes and stamps are text
`COLLATE "C"`, ids and counts `bigint`. A refused value noted again counts `times` up and a
coercion adds to `count`, row by row as in SQLite (`executemany`: the same key twice in one
batch is updated twice, never refused as a multi-row upsert would be).

**Transactions.** None of its own: `note` runs inside the page's transaction, so what it
records and forgets commits or rolls back with the page's rows, as in SQLite. `faults` of a
schema without the tables is {} (`misfits` asks the catalogue, where SQLite catches the error:
a failed statement would abort the caller's transaction).

**Differences.** The bookkeeping's (`sync.store.pg.bookkeeping`): a NUL character in a value,
problem or attribute is kept as U+FFFD. The last refused value of a type is the latest by
`last_at`, then the highest id, then the first attribute in byte order, in both stores (SQLite's
query names the same order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Tables,
    create_tables,
    exists,
    no_nul,
    statement,
)
from sync.store.values import Coerced, Coercion, Refusal, Refused, ValueNotes

__all__ = ["PgValues", "ValueNotes", "ensure_values"]

REFUSALS = "_sync_refusals"
COERCIONS = "_sync_coercions"

#: The tables of this part, as `sync.store.pg.bookkeeping.TABLES` describes its own.
TABLES: Tables = {
    REFUSALS: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("id", "bigint NOT NULL"),
            ("attribute", f"{KEY} NOT NULL"),
            ("value", "text"),
            ("problem", "text"),
            ("first_at", KEY),
            ("last_at", KEY),
            ("times", "bigint NOT NULL DEFAULT 1"),
        ),
        ("type", "id", "attribute"),
    ),
    COERCIONS: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("attribute", f"{KEY} NOT NULL"),
            ("count", "bigint NOT NULL"),
            ("last_id", "bigint"),
            ("last_value", "text"),
            ("last_at", KEY),
        ),
        ("type", "attribute"),
    ),
}


def ensure_values(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema` and the two tables where missing, in one transaction
    (`sync.store.pg.bookkeeping.create_tables`); existing tables are kept."""
    create_tables(conn, schema, TABLES)


def _texts(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """`row` with NUL as U+FFFD in each of its strings."""
    return tuple(no_nul(v) if isinstance(v, str) else v for v in row)


class PgValues:
    """`sync.store.values.ValueBook` in one PostgreSQL schema: `ValueNotes(PgValues(conn))` is
    the counterpart of the SQLite mirror's `ValueNotes(SqliteValues(conn))`."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self.conn = conn
        self.schema = schema

        def q(table: str, template: str) -> sql.Composed:
            return statement(schema, table, template, TABLES)

        self._refuse = q(
            REFUSALS,
            "INSERT INTO {t} AS r ({type}, {id}, {attribute}, {value}, {problem}, {first_at}, "
            "{last_at}, {times}) VALUES (%s, %s, %s, %s, %s, %s, %s, 1) "
            "ON CONFLICT ({type}, {id}, {attribute}) DO UPDATE SET {value} = EXCLUDED.{value}, "
            "{problem} = EXCLUDED.{problem}, {last_at} = EXCLUDED.{last_at}, "
            "{times} = r.{times} + 1",
        )
        self._coerce = q(
            COERCIONS,
            "INSERT INTO {t} AS c ({type}, {attribute}, {count}, {last_id}, {last_value}, "
            "{last_at}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT ({type}, {attribute}) "
            "DO UPDATE SET {count} = c.{count} + EXCLUDED.{count}, "
            "{last_id} = EXCLUDED.{last_id}, {last_value} = EXCLUDED.{last_value}, "
            "{last_at} = EXCLUDED.{last_at}",
        )
        self._held = q(REFUSALS, "SELECT DISTINCT {type}, {id} FROM {t}")
        self._forget = q(REFUSALS, "DELETE FROM {t} WHERE {type} = %s AND {id} = ANY(%s::bigint[])")
        self._refused = q(
            REFUSALS,
            "SELECT {type}, count(*), max({last_at}) FROM {t} GROUP BY {type} ORDER BY {type}",
        )
        self._last = q(
            REFUSALS,
            "SELECT {id}, {attribute}, {value}, {problem} FROM {t} WHERE {type} = %s "
            "ORDER BY {last_at} DESC NULLS LAST, {id} DESC, {attribute} LIMIT 1",
        )
        self._coerced = q(
            COERCIONS, "SELECT {type}, sum({count}) FROM {t} GROUP BY {type} ORDER BY {type}"
        )

    def record(self, refusals: Sequence[Refusal], coercions: Sequence[Coercion]) -> None:
        with self.conn.cursor() as cur:
            if refusals:
                cur.executemany(self._refuse, [_texts(r) for r in refusals])
            if coercions:
                cur.executemany(self._coerce, [_texts(c) for c in coercions])

    def held(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for t, rid in self.conn.cursor(row_factory=tuple_row).execute(self._held):
            out.setdefault(t, set()).add(int(rid))
        return out

    def forget(self, type_name: str, ids: Sequence[int]) -> None:
        self.conn.execute(self._forget, (no_nul(type_name), list(ids)))

    def misfits(self) -> tuple[list[Refused], list[Coerced]] | None:
        if not (
            exists(self.conn, self.schema, REFUSALS) and exists(self.conn, self.schema, COERCIONS)
        ):
            return None
        cur = self.conn.cursor(row_factory=tuple_row)
        refused = cur.execute(self._refused).fetchall()
        coerced = cur.execute(self._coerced).fetchall()
        last = [(t, n, at, cur.execute(self._last, (t,)).fetchone()) for t, n, at in refused]
        return last, coerced
