"""`sync.store.pg.upsert`: a batch whose every id is known absent is a plain insert, any other
batch the guarded upsert; both end with the same rows."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.upsert import insert_sql, upsert_sql
from tests.unit.store.pg.test_pagewrite import SCHEMA, T1, T2, _deal, _deals, _rows


def _spied(conn: psycopg.Connection[Any]) -> list[bytes]:
    """The statements `conn` runs from now on, as sent."""
    sent: list[bytes] = []
    real = conn.execute

    def spy(query: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(query, bytes):
            sent.append(query)
        return real(query, *args, **kwargs)

    conn.execute = spy  # type: ignore[method-assign]
    return sent


def _upserts(sent: list[bytes]) -> list[bool]:
    """Per INSERT into deals sent: whether it has an arbiter (ON CONFLICT)."""
    return [b"ON CONFLICT" in q for q in sent if q.startswith(b'INSERT INTO "ccsync"."deals"')]


def test_rows_known_absent_are_inserted_plainly_and_the_others_upserted(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    first = [_deals(_deal(1, T1, "a"), _deal(2, T1, "b"))]
    writer.ensure_page(first)  # the table made here: its ids tracked
    sent = _spied(conn)
    try:
        writer.write_page(first)
        writer.write_page([_deals(_deal(3, T1, "c"))])  # new again: plain
        writer.write_page([_deals(_deal(2, T2, "b2"), _deal(4, T1, "d"))])  # one written: guarded
        writer.write_page([_deals(_deal(1, T1, "older?"))])  # written, equal stamp: guarded
    finally:
        del conn.execute
    assert _upserts(sent) == [False, False, True, True]
    assert _rows(conn, "deals", "title") == [(1, "older?"), (2, "b2"), (3, "c"), (4, "d")]
    found = PageWriter(conn, SCHEMA)  # a table made before: nothing known absent
    sent = _spied(conn)
    try:
        found.write_page([_deals(_deal(5, T1, "e"))])
    finally:
        del conn.execute
    assert _upserts(sent) == [True]


def test_the_plain_insert_fails_on_a_held_row_rather_than_overwrite_it(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.ensure_page([_deals(_deal(1, T1, "a"))])
    writer.write_page([_deals(_deal(1, T1, "a"))])
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(*(writer.statement(_deals(_deal(1, T2, "b")), absent=True) or ("",)))
    assert _rows(conn, "deals", "title") == [(1, "a")]


def test_the_upsert_is_the_insert_with_its_arbiter() -> None:
    head = insert_sql(SCHEMA, "deals", ("title", "updated_at")).as_string(None)
    full = upsert_sql(SCHEMA, "deals", ("title", "updated_at")).as_string(None)
    assert full.startswith(head + " ON CONFLICT (id) DO UPDATE SET")
    assert "ON CONFLICT" not in head
    assert upsert_sql(SCHEMA, "tags", ()).as_string(None).endswith("ON CONFLICT (id) DO NOTHING")
