"""`sync.store.pg.status`: the PostgreSQL per-type status held to the SQLite one's contract.

The contract tests take `twin` and run twice (`tests.support.twin_books`): `sqlite` is
`sync.store.status.TypeStatuses` on an SQLite mirror, `postgres` this module's `TypeStatuses` on
a PostgreSQL schema made by `ensure_status` (its `Schema` the read parts'). Each asserts the same
lines of both: a line per listable type with a table or bookkeeping, its rows, newest cursor,
last sync and error (redacted, cleared by a success), and a change taken moving the last sync
forward only. The tests after them are PostgreSQL's own: the table's shape against SQLite's,
`ensure_status`, a caller's transaction, cursors compared byte by byte whatever the database's
collation, and NUL in text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.store import Mirror
from sync.store import status as sqlite_status
from sync.store.pg import status
from sync.store.pg.bookkeeping import SCHEMA, Cursors, exists
from sync.store.pg.schema import Schema
from sync.store.pg.status import TABLES, TypeStatuses, ensure_status
from sync.store.status import TypeStatus
from tests.support.twin_books import Twin, shapes

T0, T1, T2 = "2026-01-01T00:00:05.000Z", "2026-01-01T00:00:06.000Z", "2026-01-01T00:00:04.000Z"


def _types(twin: Twin) -> Any:
    """The store's `TypeStatuses` over its schema."""
    if twin.kind == "sqlite":
        return sqlite_status.TypeStatuses(twin.conn, twin.store.schema)
    return TypeStatuses(twin.conn, twin.store.schema)


# -- the contract: both implementations ------------------------------------------------------


def test_a_line_per_listable_type_with_a_table_or_bookkeeping(twin: Twin) -> None:
    types = _types(twin)
    assert types.lines() == []
    deals = [{"id": str(i), "type": "deals", "attributes": {"title": "t"}} for i in (1, 2)]
    twin.write("deals", deals, ())
    twin.cursors.set("stores", "mall=1", "c1")
    twin.cursors.set("stores", "mall=2", "c2")
    types.record("events", ok=False, error="boom", at="t1")
    types.record("images", ok=True, at="t1")  # not listable: no line
    lines = types.lines()
    assert [s.type_name for s in lines] == ["deals", "events", "stores"]  # the catalogue's order
    by_name = {s.type_name: s for s in lines}
    assert by_name["deals"] == TypeStatus("deals", 2, None, None, None)
    assert by_name["stores"] == TypeStatus("stores", 0, None, "c2", None)
    assert by_name["events"] == TypeStatus("events", 0, None, None, "boom")


def test_success_clears_the_error(twin: Twin) -> None:
    types = _types(twin)
    types.record("deals", ok=False, error="boom", at="t1")
    types.record("deals", ok=True, at="t2")
    [line] = types.lines()
    assert line.as_dict() == {
        "type": "deals",
        "rows": 0,
        "last_sync_at": "t2",
        "cursor": None,
        "last_error": None,
    }
    types.record("deals", ok=False, error=None, at="t3")  # a failure without its error
    assert types.lines()[0].last_sync_at == "t2"
    assert twin.raw("SELECT last_error, error_at FROM _sync_types") == [(None, "t3")]


def test_an_error_is_stored_redacted(twin: Twin) -> None:
    types = _types(twin)
    types.record("deals", ok=False, error="GET /deals?token=s3cret failed", at="t1")
    [line] = types.lines()
    assert line.last_error == "GET /deals?token=*** failed"
    assert twin.raw("SELECT last_error FROM _sync_types") == [(line.last_error,)]


def test_a_change_taken_moves_the_last_sync_forward_only(twin: Twin) -> None:
    types = _types(twin)
    types.took_change("deals", at=T0)  # no line yet: made
    types.record("deals", ok=False, error="boom", at=T1)
    types.took_change("deals", at=T2)  # older: no effect
    [line] = types.lines()
    assert (line.last_sync_at, line.last_error) == (T0, "boom")
    types.took_change("deals", at=T1)  # newer: moves, the error stays
    assert (types.lines()[0].last_sync_at, types.lines()[0].last_error) == (T1, "boom")
    types.record("stores", ok=False, error="x", at=T0)  # a line without a last sync
    types.took_change("stores", at=T2)
    assert {s.type_name: s.last_sync_at for s in types.lines()}["stores"] == T2


def test_writes_inside_a_transaction_stay_in_it(twin: Twin) -> None:
    types = _types(twin)
    with pytest.raises(RuntimeError), twin.atomic():
        types.record("deals", ok=True, at="t1")
        types.took_change("events", at="t1")
        assert len(types.lines()) == 2  # seen inside it
        raise RuntimeError("rolled back")
    assert types.lines() == []


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_table_has_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """`_sync_types` as SQLite has it, the type and stamps compared byte by byte."""
    ensure_status(conn)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        [(lite, pg, bytewise)] = shapes(conn, SCHEMA, mirror.conn, list(TABLES)).values()
    finally:
        mirror.close()
    assert pg == lite
    assert bytewise == {"type", "last_sync_at", "error_at"}


def test_ensure_is_idempotent_keeps_what_is_there_and_makes_the_cursors(
    conn: psycopg.Connection[Any],
) -> None:
    schema = 'Odd "schema"'
    ensure_status(conn, schema)
    types = TypeStatuses(conn, Schema(conn, schema))
    types.record("deals", ok=True, at="t1")
    Cursors(conn, schema).set("deals", "", "c")
    ensure_status(conn, schema)
    assert types.lines() == [TypeStatus("deals", 0, "t1", "c", None)]
    assert not exists(conn, status.SCHEMA, "_sync_types")  # only the schema given


def test_the_newest_cursor_is_the_greatest_byte_by_byte(pg_db: str) -> None:
    """`_sync_cursors.cursor` keeps the database's collation (it is not a key); the newest
    cursor is taken byte by byte all the same, as SQLite takes it: in a linguistic collation
    `B` sorts after `a`, in bytes before it."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        ensure_status(c)
        # ICU's root collation, in every PostgreSQL built with ICU (Debian's): a < B.
        c.execute(
            f'ALTER TABLE "{SCHEMA}"._sync_cursors ALTER COLUMN cursor TYPE text'
            ' COLLATE "und-x-icu"'
        )
        # (the tests' database is C: bytes)
        assert c.execute("SELECT max(x) FROM (VALUES ('a'), ('B')) v(x)").fetchone() == ("a",)
        assert c.execute(
            'SELECT max(cursor) FROM (VALUES (%s::text COLLATE "und-x-icu"), (%s)) v(cursor)',
            ("a", "B"),
        ).fetchone() == ("B",)
        cursors = Cursors(c)
        cursors.set("deals", "mall=1", "a")
        cursors.set("deals", "mall=2", "B")
        [line] = TypeStatuses(c, Schema(c)).lines()
        assert line.cursor == max("a", "B") == "a"


def test_a_caller_without_autocommit_commits_the_lines(pg_db: str) -> None:
    with psycopg.connect(pg_db) as c, psycopg.connect(pg_db, autocommit=True) as other:
        ensure_status(c)
        c.commit()
        TypeStatuses(c, Schema(c)).record("deals", ok=True, at="t1")
        assert TypeStatuses(other, Schema(other)).lines() == []
        c.commit()
        assert TypeStatuses(other, Schema(other)).lines()[0].last_sync_at == "t1"


def test_nul_in_an_error_is_kept_as_a_replacement_character(
    conn: psycopg.Connection[Any],
) -> None:
    ensure_status(conn)
    types = TypeStatuses(conn, Schema(conn))
    types.record("deals", ok=False, error="bad\x00byte", at="t\x00")
    [line] = types.lines()
    assert line.last_error == "bad\ufffdbyte"
    assert conn.execute(f'SELECT error_at FROM "{SCHEMA}"._sync_types').fetchone() == ("t\ufffd",)
