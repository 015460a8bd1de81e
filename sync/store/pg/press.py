"""Press releases of the management API in PostgreSQL: `mgmt_press_releases`, keyed (id, locale).

Issue #49, the counterpart of `sync.store.press` (read it first): `PressTables` (`open`) and
`PressReleases` (`write`, `unseen`, `prune`), with the same arguments, answers and order, held
to them by the contract tests of `tests/unit/store/pg/test_press.py`. Not wired into `Mirror`
yet. The rows are SQLite's, built by its own functions (`sync.store.press.release_rows`,
`category_rows`), and a prune keeps everything on SQLite's rule (`keeps_all`): an empty
listing where the locale has rows removes nothing.

**The tables** have SQLite's names, columns (in its order), keys and indexes, made by
`ensure_press` when `PressTables.open` is called, as SQLite
makes them on first use (a reader never makes them). The attachments, the image and the
category ids, JSON text in SQLite, are `jsonb` here (issue #49: objects and arrays as jsonb,
queryable as JSON); every other field is text as in SQLite (`headline` included: a string, or
the JSON text of whatever else the API sent). `fetched_at` and `seen_run` are `COLLATE "C"`.

**Writes.** `write` upserts one page in one `conn.transaction()` (its own transaction on an
idle autocommit connection, a savepoint inside a caller's): a release given twice in a page
is its last copy, as SQLite's row-by-row `INSERT OR REPLACE` leaves it, and its categories in
that locale are replaced by the page's. Rows are written in key order (no deadlock between two
writers).

**Unavoidable differences.** A `jsonb` value keeps its keys in jsonb's order (shorter keys
first, then byte order; a key given twice only once), so its text can differ from SQLite's
while the JSON it holds is equal; `image` absent is the JSON `null`, as SQLite's text 'null'
(not SQL NULL). PostgreSQL text cannot hold NUL: a text field, or a string inside a JSON one,
with one is stored with U+FFFD in its place (`sync.store.pg.columns.json_value`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model.stamps import now_iso
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Indexes,
    Tables,
    create_tables,
    no_nul,
    statement,
)
from sync.store.pg.columns import json_value
from sync.store.press import (
    CATEGORIES,
    COLUMNS,
    JSON_COLUMNS,
    TABLE,
    category_rows,
    keeps_all,
    release_rows,
)

#: The tables, as `sync.store.pg.bookkeeping.TABLES` describes its own: `mgmt_press_releases` in
#: SQLite's column order (which is not `COLUMNS`' order), and its categories.
TABLES: Tables = {
    TABLE: (
        (
            ("id", "bigint NOT NULL"),
            ("locale", f"{KEY} NOT NULL"),
            *((c, "text") for c in ("title", "slug", "teaser", "body", "headline", "published_at")),
            ("attachments", "jsonb"),
            ("image", "jsonb"),
            ("url", "text"),
            ("category_ids", "jsonb"),
            ("seen_run", KEY),
            ("fetched_at", KEY),
        ),
        ("id", "locale"),
    ),
    CATEGORIES: (
        (
            ("press_release_id", "bigint NOT NULL"),
            ("locale", f"{KEY} NOT NULL"),
            ("category_id", "bigint NOT NULL"),
        ),
        ("press_release_id", "locale", "category_id"),
    ),
}
#: SQLite's indexes, under its names.
INDEXES: Indexes = {
    f"idx_{TABLE}_slug": (TABLE, ("slug",)),
    f"idx_{CATEGORIES}_category": (CATEGORIES, ("category_id",)),
}
#: The positions of the JSON columns in a row of `release_rows`.
_JSON_AT = frozenset(COLUMNS.index(c) for c in JSON_COLUMNS)


def ensure_press(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema`, the press releases' tables and their indexes when missing, in one
    transaction (`sync.store.pg.bookkeeping.create_tables`); existing ones are kept."""
    create_tables(conn, schema, TABLES, INDEXES)


def _q(schema: str, table: str, template: str) -> sql.Composed:
    """`template` on one of the press tables (`sync.store.pg.bookkeeping.statement`)."""
    return statement(schema, table, template, TABLES)


def _bound(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of `release_rows` as bound here: JSON columns as jsonb, text without NUL."""
    return tuple(
        json_value(v) if i in _JSON_AT else no_nul(v) if isinstance(v, str) else v
        for i, v in enumerate(row)
    )


class PressReleases:
    """Writes of one listing run per locale (`sync.store.press.PressReleases`); the tables are
    made when it is."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        ensure_press(conn, schema)
        s = schema
        cols = ", ".join(f"{{{c}}}" for c in COLUMNS)
        sets = ", ".join(f"{{{c}}} = EXCLUDED.{{{c}}}" for c in COLUMNS[2:])
        self._upsert = _q(
            s,
            TABLE,
            f"INSERT INTO {{t}} ({cols}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
            f" ON CONFLICT ({{id}}, {{locale}}) DO UPDATE SET {sets}",
        )
        self._drop_categories = _q(
            s,
            CATEGORIES,
            "DELETE FROM {t} WHERE {press_release_id} = ANY(%s::bigint[]) AND {locale} = %s",
        )
        self._add_categories = _q(
            s,
            CATEGORIES,
            "INSERT INTO {t} ({press_release_id}, {locale}, {category_id}) SELECT DISTINCT"
            " r, %s, c FROM unnest(%s::bigint[], %s::bigint[]) AS n(r, c) ORDER BY r, c"
            " ON CONFLICT DO NOTHING",
        )
        self._unseen = _q(
            s, TABLE, "SELECT {id} FROM {t} WHERE {locale} = %s AND {seen_run} != %s ORDER BY {id}"
        )
        self._held = _q(s, TABLE, "SELECT count(*) FROM {t} WHERE {locale} = %s")
        seen = _q(
            s,
            TABLE,
            "SELECT 1 FROM {t} r WHERE r.{id} = c.press_release_id AND r.{locale} = c.locale"
            " AND r.{seen_run} = %s",
        )
        self._prune_categories = sql.SQL("{} AND NOT EXISTS ({})").format(
            _q(
                s,
                CATEGORIES,
                "DELETE FROM {t} c WHERE c.{press_release_id} = ANY(%s::bigint[])"
                " AND c.{locale} = %s",
            ),
            seen,
        )
        self._prune = _q(
            s,
            TABLE,
            "DELETE FROM {t} WHERE {id} = ANY(%s::bigint[]) AND {locale} = %s AND {seen_run} != %s",
        )

    def write(self, locale: str, run: str, items: Sequence[dict[str, Any]]) -> int:
        """Upsert one page of one locale in one transaction; mark the rows as seen by `run`."""
        rows = release_rows(locale, run, items, now_iso())
        last = {(r[0], r[1]): r for r in rows}  # a release given twice: its last copy
        pairs = category_rows(locale, items)
        key = no_nul(locale)
        with self.conn.transaction(), self.conn.cursor() as cur:
            if last:
                cur.executemany(self._upsert, [_bound(last[k]) for k in sorted(last)])
            cur.execute(self._drop_categories, (sorted({int(p["id"]) for p in items}), key))
            if pairs:
                cur.execute(
                    self._add_categories,
                    (key, [int(r) for r, _, _ in pairs], [c for _, _, c in pairs]),
                )
        return len(rows)

    def unseen(self, locale: str, run: str) -> list[int]:
        """Ids of `locale` the listing `run` did not return."""
        rows = self._rows(self._unseen, (no_nul(locale), no_nul(run)))
        return [int(r[0]) for r in rows]

    def prune(self, locale: str, run: str, listed: int, proven: Collection[int]) -> int:
        """Remove the rows of `locale` that listing `run` did not see and proved absent
        (`proven`, see `sync.management.client.Walk`); returns the number of rows removed."""
        key, seen = no_nul(locale), no_nul(run)
        if keeps_all(listed, int(self._rows(self._held, (key,))[0][0])):
            return 0  # an empty listing where there were rows: keep them, the next run decides
        gone = sorted({int(i) for i in proven})
        if not gone:
            return 0
        with self.conn.transaction():
            self.conn.execute(self._prune_categories, (gone, key, seen))
            return self.conn.execute(self._prune, (gone, key, seen)).rowcount

    def _rows(self, query: Any, params: Any) -> list[tuple[Any, ...]]:
        return self.conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()


class PressTables:
    """The press releases' tables of one PostgreSQL mirror (`sync.store.press.PressTables`):
    made on first use, so a reader never makes them."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self._conn = conn
        self._schema = schema

    def open(self) -> PressReleases:
        """The writes of one listing run per locale (`PressReleases`), the tables made."""
        return PressReleases(self._conn, self._schema)
