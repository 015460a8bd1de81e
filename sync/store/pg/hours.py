"""A mall's hours in PostgreSQL: the `hours` table and `current_hours`.

Issue #49, the counterpart of `sync.store.hours` (read it first): `Hours` (`write`,
`write_current`) and the module's functions, with the same arguments and meaning, held to them
by the contract tests of `tests/unit/store/pg/test_hours.py`. Not wired into `Mirror` yet. The
rows arrive staged as for SQLite (`sync.pipeline.hours.stage_hours`) and are grouped by SQLite's
rule (`sync.store.hours.by_columns`).

**`hours`** has SQLite's name, key (mall_id, date) and columns, made on the first refresh as
SQLite makes it (a column for each attribute of its days, of `sync.store.hours.EMPTY_DAY` when
none is given) and widened as the upstream grows new attributes. A refresh replaces one mall's days in a date
range as a whole, in one `conn.transaction()` (its own transaction on an idle autocommit
connection, a savepoint inside a caller's): the range's days no longer served go, then each row
is written, a day already held (in the range or outside it) replaced whole (its columns the row
does not name become NULL, as SQLite's `INSERT OR REPLACE` leaves them). Only what differs is
written: a day held with the same attributes keeps its version, and its `fetched_at` (a
deliberate difference from SQLite, which rewrites it: an unchanged refresh leaves no dead
tuple, the issue's ~0 on an unchanged pass). The table and its columns are changed in a
transaction of their own first, as SQLite's are (`ensure_table`); `Schema.forget` is told.

**`current_hours`** keeps one mall's `/current-hours` answer whole: SQLite's table (made by its
bookkeeping, on open), made here by `ensure_hours`, to be called where the mirror's tables are
made. Its `body` is `jsonb` (issue #49: JSON as jsonb), JSON text in SQLite.

**Types.** A column's type is SQLite's affinity for the values it holds (`bigint`, `double
precision`, `text`: `sync.store.schema.column_type`, and text for a null), `mall_id` a bigint,
`date` and `fetched_at` text `COLLATE "C"` (compared byte by byte, as SQLite compares them).
No foreign key to `malls`: PostgreSQL would enforce it, and a mall's hours may come before its
row.

**Unavoidable differences.** A PostgreSQL column holds one type, where SQLite's affinity keeps
whatever comes: a value that does not fit its column widens it (bigint, then double precision,
then text; `ALTER COLUMN ... TYPE` rewrites the table under an exclusive lock), and a column
is made from every day of a refresh, not the first alone (SQLite makes the first day's; a
later day with another attribute fails there). A number in a text column is stored as its
text, as SQLite's TEXT affinity stores it. An attribute named as a system column (`xmin`) or
longer than 63 bytes is not stored (`sync.store.pg.columns.usable`); names are exact (SQLite
folds their case). PostgreSQL text cannot hold NUL: U+FFFD takes its place, in a `body` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model import catalogue
from sync.model.stamps import now_iso
from sync.store.hours import EMPTY_DAY, by_columns
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Tables,
    create_schema,
    create_tables,
    no_nul,
    statement,
)
from sync.store.pg.columns import (
    BIGINT,
    DOUBLE,
    TEXT,
    WIDER,
    alter_columns,
    json_value,
    usable,
)
from sync.store.pg.schema import Schema

HOURS = catalogue.HOURS_TABLE
#: The columns every `hours` table has, and their types.
FIXED = {"mall_id": BIGINT, "date": KEY, "fetched_at": KEY}
CURRENT = catalogue.CURRENT_HOURS_TABLE
#: `current_hours` as SQLite's bookkeeping makes it (without its foreign key), as
#: `sync.store.pg.bookkeeping.TABLES` describes its own.
TABLES: Tables = {
    CURRENT: (
        (("mall_id", "bigint NOT NULL"), ("body", "jsonb"), ("fetched_at", KEY)),
        ("mall_id",),
    )
}


def ensure_hours(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema` and `current_hours` when missing (`sync.store.pg.bookkeeping.create_tables`;
    `hours` is made by its first refresh)."""
    create_tables(conn, schema, TABLES)


def affinity(value: Any) -> str:
    """The column type SQLite's affinity gives `value` as staged (`column_type`): a whole number
    bigint, a float double precision, anything else (a string, a null) text."""
    if isinstance(value, bool | int):
        return BIGINT
    if isinstance(value, float):
        return DOUBLE
    return TEXT


def _types(schema: Schema) -> dict[str, str]:
    """The columns of `hours` and their types ({} when it does not exist)."""
    rows = (
        schema.conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a"
            " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')"
            " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (schema.name, HOURS),
        )
        .fetchall()
    )
    return {str(name): str(kind) for name, kind in rows}


def wanted(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every usable attribute of `rows` (in the order first met) and the narrowest type that
    holds each of its values: the widest affinity among them, text when all are null."""
    found: dict[str, str | None] = {}
    for row in rows:
        for column, value in row.items():
            if column in FIXED or not usable(column):
                continue
            held = found.setdefault(column, None)
            if value is not None:
                kind = affinity(value)
                if held is None or WIDER.index(kind) > WIDER.index(held):
                    found[column] = kind
    return {c: t or TEXT for c, t in found.items()}


def ensure_table(schema: Schema, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """`hours` made when missing, keyed by (mall_id, date), with a column for each attribute of
    `rows` (of `EMPTY_DAY` when there is none and no table), and a column widened where a value
    does not fit, in a transaction of its own (a savepoint inside a caller's). Its columns and
    their types, after."""
    conn = schema.conn
    have = _types(schema)
    want = wanted(rows or ([] if have else [EMPTY_DAY]))
    add = [(c, t) for c, t in want.items() if c not in have]
    widen = [
        (c, t)
        for c, t in want.items()
        if have.get(c) in WIDER and WIDER.index(t) > WIDER.index(have[c])
    ]
    if have and not add and not widen:
        return have
    target = sql.Identifier(schema.name, HOURS)
    try:
        with conn.transaction():
            if not have:
                create_schema(conn, schema.name)
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY (mall_id, date))"
                    ).format(
                        target,
                        sql.SQL(", ").join(
                            sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                            for c, t in FIXED.items()
                        ),
                    ),
                    prepare=False,
                )
            alter_columns(conn, target, add, widen)
    finally:
        schema.forget(HOURS)
    return _types(schema)


def _value(value: Any, kind: str) -> Any:
    """A staged value as its column (of type `kind`) takes it."""
    if value is None:
        return None
    if kind.startswith(TEXT):
        return no_nul(value) if isinstance(value, str) else str(value)
    if kind == BIGINT and isinstance(value, bool):
        return int(value)
    return value


def write(
    schema: Schema, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date
) -> int:
    """Replace one mall's hours between `start` and `end` (inclusive) by `rows`: the range's
    days `rows` no longer serve deleted, each row inserted or replaced whole where its content
    differs (a day the same as held is left as it is, its `fetched_at` too: a rewrite would
    leave a dead tuple for each day of each mall on every refresh)."""
    conn = schema.conn
    types = ensure_table(schema, rows)
    target = sql.Identifier(schema.name, HOURS)
    keep = [c for c in types if c not in ("mall_id", "date")]
    content = [c for c in keep if c != "fetched_at"]
    served = sorted({str(r["date"]) for r in rows if r.get("mall_id") == mall_id})
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "DELETE FROM {} WHERE mall_id = %s AND date BETWEEN %s AND %s"
                " AND date <> ALL(%s::text[])"
            ).format(target),
            (mall_id, start.isoformat(), end.isoformat(), served),
        )
        for cols, group in by_columns(rows).items():
            names = [c for c in cols if c in types]
            cur.executemany(
                _upsert(target, names, keep, content),
                [tuple(_value(r[c], types[c]) for c in names) for r in group],
            )
    return len(rows)


def _upsert(
    target: sql.Identifier, names: list[str], keep: list[str], content: list[str]
) -> sql.Composed:
    """Insert a day of `names`, or replace the held one whole (`keep`: its columns the row
    does not name become NULL, as SQLite's `INSERT OR REPLACE` leaves them) where its
    `content` differs."""
    set_ = sql.SQL(", ").join(
        sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in keep
    )
    held = sql.SQL(", ").join(sql.SQL("h.{}").format(sql.Identifier(c)) for c in content)
    came = sql.SQL(", ").join(sql.SQL("EXCLUDED.{}").format(sql.Identifier(c)) for c in content)
    guard = (
        sql.SQL(" WHERE ROW({}) IS DISTINCT FROM ROW({})").format(held, came)
        if content
        else sql.SQL(" WHERE false")
    )
    return sql.SQL(
        "INSERT INTO {} AS h ({}) VALUES ({}) ON CONFLICT (mall_id, date) DO UPDATE SET {}{}"
    ).format(
        target,
        sql.SQL(", ").join(map(sql.Identifier, names)),
        sql.SQL(", ").join(sql.Placeholder() * len(names)),
        set_,
        guard,
    )


def write_current(
    conn: psycopg.Connection[Any], mall_id: int, body: Any, schema: str = SCHEMA
) -> None:
    """One mall's `/current-hours` answer, kept whole (`current_hours` made by `ensure_hours`)."""
    conn.execute(
        statement(
            schema,
            CURRENT,
            "INSERT INTO {t} ({mall_id}, {body}, {fetched_at}) VALUES (%s, %s, %s)"
            " ON CONFLICT ({mall_id}) DO UPDATE SET {body} = EXCLUDED.{body},"
            " {fetched_at} = EXCLUDED.{fetched_at}",
            TABLES,
        ),
        (mall_id, json_value(orjson.dumps(body).decode()), now_iso()),
    )


class Hours:
    """A PostgreSQL mirror's hours and current hours (`sync.store.hours.Hours`)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def write(self, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date) -> int:
        """Replace one mall's hours between `start` and `end` (inclusive) by `rows`, staged
        (`sync.pipeline.hours.stage_hours`); how many rows were written."""
        return write(self.schema, mall_id, rows, start, end)

    def write_current(self, mall_id: int, body: Any) -> None:
        """One mall's `/current-hours` answer, kept whole."""
        write_current(self.schema.conn, mall_id, body, self.schema.name)
