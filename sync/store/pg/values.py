"""The PostgreSQL mirror's notes of misfit values: `_sync_refusals` and `_sync_coercions`.

Issue #49: the counterpart of `sync.store.values.ValueNotes` (read that module's docstring
first). What is logged, counted, told (`on_values`) and forgotten, and when, is
`sync.store.values.Notes`'s, written once for both stores; this class gives it PostgreSQL's
statements, and the rows it keeps (`refusal_rows`, `coercion_rows`, values redacted) and the
faults it reports (`faults_of`) are that module's functions. Held to it by the contract tests
of `tests/unit/store/pg/test_values.py`. Not wired into `Mirror` yet.

**Tables.** SQLite's names and columns (`sync.store.schema.BOOKKEEPING`), in one schema
(`SCHEMA` unless told), made by `ensure_values`. Types, attributes and stamps are text
`COLLATE "C"`, ids and counts `bigint`. A refused value noted again counts `times` up and a
coercion adds to `count`, row by row as in SQLite (`executemany`: the same key twice in one
batch is updated twice, never refused as a multi-row upsert would be).

**Transactions.** None of its own: `note` runs inside the page's transaction, so what it
records and forgets commits or rolls back with the page's rows, as in SQLite. `faults` of a
schema without the tables is {} (asked of the catalogue, where SQLite catches the error: a
failed statement would abort the caller's transaction).

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

from sync.model.stamps import now_iso
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Tables,
    create_tables,
    exists,
    no_nul,
    statement,
)
from sync.store.values import Notes, OnValues, coercion_rows, faults_of, refusal_rows

__all__ = ["OnValues", "ValueNotes", "ensure_values"]

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


class ValueNotes(Notes):
    """`sync.store.values.Notes` in one PostgreSQL schema: the counterpart of
    `sync.store.values.ValueNotes`."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        super().__init__()
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
        self._held_ids = q(REFUSALS, "SELECT DISTINCT {type}, {id} FROM {t}")
        self._forget_ids = q(
            REFUSALS, "DELETE FROM {t} WHERE {type} = %s AND {id} = ANY(%s::bigint[])"
        )
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

    def _record(
        self,
        type_name: str,
        refused: Sequence[tuple[int, str, str, str]],
        coerced: Sequence[tuple[int, str, str]],
    ) -> None:
        now = now_iso()
        with self.conn.cursor() as cur:
            refusals = [_texts(r) for r in refusal_rows(type_name, refused, now)]
            if refusals:
                cur.executemany(self._refuse, refusals)
            coercions = [_texts(r) for r in coercion_rows(type_name, coerced, now)]
            if coercions:
                cur.executemany(self._coerce, coercions)

    def _held(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        cur = self.conn.cursor(row_factory=tuple_row)
        for t, rid in cur.execute(self._held_ids):
            out.setdefault(t, set()).add(int(rid))
        return out

    def _forget(self, type_name: str, ids: Sequence[int]) -> None:
        self.conn.execute(self._forget_ids, (no_nul(type_name), list(ids)))

    def faults(self) -> dict[str, dict[str, Any]]:
        if not (
            exists(self.conn, self.schema, REFUSALS) and exists(self.conn, self.schema, COERCIONS)
        ):
            return {}
        cur = self.conn.cursor(row_factory=tuple_row)
        refused = cur.execute(self._refused).fetchall()
        coerced = cur.execute(self._coerced).fetchall()
        last = [(t, n, at, cur.execute(self._last, (t,)).fetchone()) for t, n, at in refused]
        return faults_of(last, coerced)
