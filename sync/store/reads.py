"""Reads of content tables: counts, ids in order, stamps and single rows.

Every read streams or chunks: `ids` walks a table by keyset (never the whole table in memory)
and `stamps` asks 500 ids at a time (under SQLite's bound-parameter limit). A table that does
not exist yet reads as empty. Reads scoped to a mall go through its memberships
(`sync.store.memberships`), not the rows' `mall_id`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sync.store import memberships
from sync.store.schema import Schema


def count(schema: Schema, type_name: str, mall_id: int | None) -> int:
    if not schema.columns(type_name):
        return 0
    if mall_id is None:
        return int(schema.conn.execute(f"SELECT count(*) FROM [{type_name}]").fetchone()[0])
    return memberships.count_in_mall(schema.conn, type_name, mall_id)


def ids(schema: Schema, type_name: str, mall_id: int | None, after: int | None) -> Iterator[int]:
    """Ids of a table in order (those greater than `after`, when given), 1,000 at a time."""
    if not schema.columns(type_name):
        return
    if mall_id is not None:
        yield from memberships.ids_in_mall(schema.conn, type_name, mall_id, after)
        return
    last = -(1 << 63) if after is None else after
    while True:
        chunk = [
            int(r[0])
            for r in schema.conn.execute(
                f"SELECT id FROM [{type_name}] WHERE id > ? ORDER BY id LIMIT 1000", (last,)
            )
        ]
        yield from chunk
        if len(chunk) < 1000:
            return
        last = chunk[-1]


def stamps(schema: Schema, type_name: str, wanted: Sequence[int]) -> dict[int, str | None]:
    """`updated_at` of those of `wanted` the table holds (None for a type without one)."""
    cols = schema.columns(type_name)
    if not cols or not wanted:
        return {}
    stamp = "updated_at" if "updated_at" in cols else "NULL"
    out: dict[int, str | None] = {}
    for start in range(0, len(wanted), 500):
        chunk = list(wanted[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for rid, updated in schema.conn.execute(
            f"SELECT id, {stamp} FROM [{type_name}] WHERE id IN ({marks})", chunk
        ):
            out[int(rid)] = updated
    return out


def get(schema: Schema, type_name: str, rid: int) -> dict[str, Any] | None:
    """One row as a dict of its columns (None: no such row or table)."""
    if not schema.columns(type_name):
        return None
    cur = schema.conn.execute(f"SELECT * FROM [{type_name}] WHERE id = ?", (rid,))
    row = cur.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cur.description], row, strict=True))
