"""A mall's hours in PostgreSQL: the `hours` table and `current_hours`.

Issue #49, the counterpart of `sync.store.hours` (read it first): `Hours` (`write`,
`write_current`) and the module's functions, with the same arguments and meaning, held to them
by the contract tests of `tests/unit/store/pg/test_hours.py`. Not wired into `Mirror` yet. The
rows arrive staged as for SQLite (`sync.pipeline.hours.stage_hours`) and are grouped by SQLite's
rule (`sync.store.hours.by_columns`).

**`hours`** has SQLite's name, key (mall_id, date) and columns, made on the first refresh as
SQLite makes it (a column for each attribute of its days, of `sync.store.hours.EMPTY_DAY` when
none is given) and widened as the upstream grows new attributes. A refresh replaces one mall's
days in a date range as a whole, atomically (its own transaction on an idle autocommit
connection; inside a caller's transaction, a bulk load's pipelined group, a part of it with no
savepoint: `write`): the range's days no longer served go, then each row is written, one
statement for all the days of a column set, a day already held (in the range or outside it)
replaced whole (its columns the row does not name become NULL, as SQLite's `INSERT OR REPLACE`
leaves them), of a day given twice the last copy. Only what differs is written: a day held with
the same attributes keeps its version, and its `fetched_at` (a deliberate difference from
SQLite, which rewrites it: an unchanged refresh leaves no dead tuple, the issue's ~0 on an
unchanged pass). The table and its columns are changed in a transaction of their own first, as
SQLite's are (`ensure_table`); `Schema.forget` is told. Their types are `Schema.types`, read
once: a refresh that changes no column asks the catalogue nothing (a bulk load's group that
rolls back forgets them: `PgMirror`).

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

import functools
from collections.abc import Callable, Sequence
from datetime import date
from types import NoneType
from typing import Any

import orjson
import psycopg
from psycopg import pq, sql

from sync.model import catalogue
from sync.model.stamps import now_iso
from sync.store.hours import EMPTY_DAY, by_columns
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Tables,
    create_schema,
    create_tables,
    statement,
)
from sync.store.pg.columns import (
    BIGINT,
    DOUBLE,
    TEXT,
    WIDER,
    alter_columns,
    json_value,
    plain_texts,
    to_text,
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


def _widest(rows: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """Every usable attribute of `rows` (in the order first met) and the widest affinity among
    its values, None when all are null."""
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
    return found


def wanted(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every usable attribute of `rows` (in the order first met) and the narrowest type that
    holds each of its values, the type of its column when made: the widest affinity among
    them, text when all are null."""
    return {c: t or TEXT for c, t in _widest(rows).items()}


#: The types of staged values a numeric column holds as they are (any fits a text column).
HOLDS = {BIGINT: frozenset({int, bool, NoneType}), DOUBLE: frozenset({int, bool, float, NoneType})}


def fits(have: dict[str, str], rows: Sequence[dict[str, Any]]) -> bool:
    """Whether the columns `have` take `rows` as they are: a column for each usable attribute,
    of a type that holds its values (a null fits any column). A column set at a time, and the
    values of numeric columns only: the question of every refresh, where `wanted` looks at
    each value."""
    for cols, group in by_columns(rows).items():
        for c in cols:
            kind = have.get(c)
            if kind is None:
                if c in FIXED or not usable(c):
                    continue
                return False
            holds = HOLDS.get(kind)
            if holds is not None and not {type(r[c]) for r in group} <= holds:
                return False
    return True


def ensure_table(schema: Schema, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """`hours` made when missing, keyed by (mall_id, date), with a column for each attribute of
    `rows` (of `EMPTY_DAY` when there is none and no table), and a column widened where a value
    does not fit (a null fits any), in a transaction of its own (a savepoint inside a
    caller's). Its columns and their types, after: as `schema` keeps them (`Schema.types`,
    read once, so a refresh that changes nothing asks the catalogue nothing, a read that would
    make a bulk load's pipeline wait), read again after a change (`forget`)."""
    conn = schema.conn
    have = schema.types(HOURS)
    if have and fits(have, rows):
        return have
    widest = _widest(rows or ([] if have else [EMPTY_DAY]))
    add = [(c, t or TEXT) for c, t in widest.items() if c not in have]
    widen = [
        (c, t)
        for c, t in widest.items()
        if t is not None and have.get(c) in WIDER and WIDER.index(t) > WIDER.index(have[c])
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
    return schema.types(HOURS)


def _column(values: list[Any], kind: str) -> list[Any]:
    """One column's staged values as the column (of type `kind`) takes them, of one Python type
    (psycopg binds a list of mixed types as no array): a text column's as `str` (a number as
    its text, NUL as U+FFFD: `to_text`), a double's as `float`, a bigint's as `int`. Values
    already so are passed on as they are (one check of the whole column)."""
    if kind.startswith(TEXT):
        return values if plain_texts(values) else [_or_none(to_text, v) for v in values]
    if kind == DOUBLE and not set(map(type, values)) <= {float, NoneType}:
        return [_or_none(float, v) for v in values]
    if kind == BIGINT and bool in set(map(type, values)):
        return [_or_none(int, v) for v in values]
    return values


def _or_none(convert: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else convert(value)


def _last_copies(columns: list[list[Any]], key: Sequence[int]) -> list[list[Any]]:
    """The `columns` of one column set's days (their key the columns at `key`), one a day: of
    a day's copies the last, as a statement a row leaves it (one statement cannot touch a row
    twice: "ON CONFLICT DO UPDATE command cannot affect row a second time"). Keyed as the
    server compares them, the values converted (`_column`): `date` 5 and "5" are one day."""
    keys = list(zip(*(columns[i] for i in key), strict=True))
    if len(set(keys)) == len(keys):
        return columns
    kept = sorted({k: i for i, k in enumerate(keys)}.values())  # the last copy of each day
    return [[column[i] for i in kept] for column in columns]


def _inside(conn: psycopg.Connection[Any]) -> bool:
    """Whether `conn` is in a caller's transaction or pipeline (a bulk load's group)."""
    return (
        conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
        or conn.info.transaction_status != pq.TransactionStatus.IDLE
    )


def write(
    schema: Schema, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date
) -> int:
    """Replace one mall's hours between `start` and `end` (inclusive) by `rows`: the range's
    days `rows` no longer serve deleted, each row inserted or replaced whole where its content
    differs (a day the same as held is left as it is, its `fetched_at` too: a rewrite would
    leave a dead tuple for each day of each mall on every refresh).

    A delete and one upsert a column set (`_upsert`: two statements when every day names the
    same attributes), and, when no column is to be made or widened, no wait for the server:
    the columns' types come from `schema`'s cache, and inside a caller's transaction (a bulk
    load's group, which the hours refresh runs beside) the statements are a part of it, with
    no savepoint: in the group's pipeline a read or a savepoint waits for every statement sent
    before it, with the event loop stalled. A failure then aborts the caller's transaction
    (the whole group rolls back, as for a page's statement), where a savepoint would have
    undone this write alone; no caller goes on after one (the hours job lets a store's error
    through). Outside a transaction, one of its own (`conn.transaction()`)."""
    conn = schema.conn
    types = ensure_table(schema, rows)
    encoding = conn.info.encoding
    keep = tuple(c for c in types if c not in ("mall_id", "date"))
    served = sorted({str(r["date"]) for r in rows if r.get("mall_id") == mall_id})
    statements: list[tuple[bytes, Sequence[Any]]] = [
        (_delete(schema.name, encoding), (mall_id, start.isoformat(), end.isoformat(), served))
    ]
    for cols, group in by_columns(rows).items():
        names = tuple(c for c in cols if c in types)
        kinds = tuple(types[c] for c in names)
        columns = [_column([r[c] for r in group], k) for c, k in zip(names, kinds, strict=True)]
        key = [i for i, c in enumerate(names) if c in ("mall_id", "date")]
        statements.append(
            (_upsert(schema.name, encoding, names, kinds, keep), _last_copies(columns, key))
        )
    if _inside(conn):
        for query, params in statements:
            conn.execute(query, params)
    else:
        with conn.transaction():
            for query, params in statements:
                conn.execute(query, params)
    return len(rows)


@functools.lru_cache(maxsize=16)
def _delete(schema: str, encoding: str) -> bytes:
    """Delete a mall's days in a range but those served (`write`), in `encoding` (the
    connection's), composed once."""
    return (
        sql.SQL(
            "DELETE FROM {} WHERE mall_id = %s AND date BETWEEN %s AND %s"
            " AND date <> ALL(%b::text[])"
        )
        .format(sql.Identifier(schema, HOURS))
        .as_string()
        .encode(encoding)
    )


@functools.lru_cache(maxsize=256)
def _upsert(
    schema: str,
    encoding: str,
    names: tuple[str, ...],
    kinds: tuple[str, ...],
    keep: tuple[str, ...],
) -> bytes:
    """Insert into `hours` of `schema` the days of columns `names` (one array a column, of
    `kinds`, unnested), each one new or replacing the held one whole (`keep`, every column but
    the key: those the row does not name become NULL, as SQLite's `INSERT OR REPLACE` leaves
    them) where its content (all but `fetched_at`) differs. The days are taken in key order,
    as the page write takes its rows. Composed once a column set, in `encoding` (the
    connection's): the same text each time, which the server prepares once."""
    content = [c for c in keep if c != "fetched_at"]
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
    order = [sql.SQL("u.{}").format(sql.Identifier(c)) for c in ("mall_id", "date") if c in names]
    return (
        sql.SQL(
            "INSERT INTO {} AS h ({}) SELECT {} FROM unnest({}) AS u ({}){}"
            " ON CONFLICT (mall_id, date) DO UPDATE SET {}{}"
        )
        .format(
            sql.Identifier(schema, HOURS),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(sql.SQL("u.{}").format(sql.Identifier(c)) for c in names),
            sql.SQL(", ").join(sql.SQL("%b::{}[]").format(sql.SQL(k)) for k in kinds),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(order)) if order else sql.SQL(""),
            set_,
            guard,
        )
        .as_string()
        .encode(encoding)
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
