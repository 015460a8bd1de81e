"""Every statement on a mall's hours: the `hours` table and `current_hours`.

`hours` holds one row per (mall, date), its columns the day's attributes as served, added as
the upstream grows new ones (like a content table's, with sqlite-utils); a refresh replaces one
mall's days in a date range as a whole, so a day the upstream no longer lists goes. The rows
arrive staged (`sync.pipeline.hours`). `current_hours` keeps the `/current-hours` answer of each
mall whole, as JSON. `Hours` is both on one mirror (`Mirror.hours`). A mall's deletion takes both with it (`sync.store.memberships.drop_mall`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import date
from typing import Any

import orjson

from sync.model.stamps import now_iso
from sync.store.schema import PYTYPE_NAME, Schema, column_type
from sync.store.transaction import write_transaction

#: The columns of a new `hours` table when the first refresh brings no day to take them from.
EMPTY_DAY = {"day": "", "hours_text": "", "description": ""}


def ensure_table(schema: Schema, sample: dict[str, Any]) -> None:
    """The `hours` table, keyed by (mall_id, date), widened like content tables."""
    have = schema.columns("hours")
    if not have:
        cols = {"mall_id": int, "date": str, "fetched_at": str}
        cols.update({k: column_type(v) for k, v in sample.items() if k not in cols})
        defs = ", ".join(
            f"[{k}] {PYTYPE_NAME[t]}" + (" REFERENCES [malls](id)" if k == "mall_id" else "")
            for k, t in cols.items()
        )
        schema.conn.execute(
            f"CREATE TABLE IF NOT EXISTS hours ({defs}, PRIMARY KEY (mall_id, date))"
        )
    else:
        for key, value in sample.items():
            if key not in have:
                schema.db.table("hours").add_column(key, column_type(value))
    schema.forget("hours")


def by_columns(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """`rows` grouped by their columns (in the order first met), each group in the order given:
    one statement a group, a later row of a day replacing an earlier one."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r), []).append(r)
    return groups


def write(
    schema: Schema, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date
) -> int:
    """Replace one mall's hours between `start` and `end` (inclusive) by `rows`."""
    conn = schema.conn
    if rows or not schema.columns("hours"):
        ensure_table(schema, rows[0] if rows else EMPTY_DAY)
    with write_transaction(conn):
        conn.execute(
            "DELETE FROM hours WHERE mall_id = ? AND date BETWEEN ? AND ?",
            (mall_id, start.isoformat(), end.isoformat()),
        )
        for cols, group in by_columns(rows).items():
            names = ", ".join(f"[{c}]" for c in cols)
            conn.executemany(
                f"INSERT OR REPLACE INTO hours ({names}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r[c] for c in cols) for r in group],
            )
    return len(rows)


def write_current(conn: sqlite3.Connection, mall_id: int, body: Any) -> None:
    """One mall's `/current-hours` answer, kept whole."""
    conn.execute(
        "INSERT INTO current_hours (mall_id, body, fetched_at) VALUES (?, ?, ?) "
        "ON CONFLICT(mall_id) DO UPDATE SET body = excluded.body, fetched_at = excluded.fetched_at",
        (mall_id, orjson.dumps(body).decode(), now_iso()),
    )


class Hours:
    """A mirror's hours and current hours (`Mirror.hours`)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    def write(self, mall_id: int, rows: Sequence[dict[str, Any]], start: date, end: date) -> int:
        """Replace one mall's hours between `start` and `end` (inclusive) by `rows`, staged
        (`sync.pipeline.hours.stage_hours`); how many rows were written."""
        return write(self.schema, mall_id, rows, start, end)

    def write_current(self, mall_id: int, body: Any) -> None:
        """One mall's `/current-hours` answer, kept whole."""
        write_current(self.schema.conn, mall_id, body)
