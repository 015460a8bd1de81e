"""`sync.store.pg.values`: the PostgreSQL notes of misfit values held to the SQLite ones' contract.

The contract tests take `twin` and run twice (`tests.support.twin_books`): `sqlite` is
`sync.store.values.ValueNotes` over `SqliteValues` on an SQLite mirror, `postgres` the same
over this module's `PgValues` on a PostgreSQL schema made by `ensure_values`. Each asserts the
same of both: refused and coerced values recorded (redacted) and counted, the daemon told, a
refusal noted again counted up and forgotten once its row is written well, the faults `ccsync
status` shows (the last refused value among ties too), notes rolled back with their page. The
tests after them are PostgreSQL's own: the tables' shape against SQLite's, `ensure_values`, a
schema without the tables, and NUL in text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from sync.pipeline.batches import Staged
from sync.store import Mirror
from sync.store import values as sqlite_values
from sync.store.pg import values
from sync.store.pg.bookkeeping import SCHEMA, exists
from sync.store.pg.values import TABLES, PgValues, ValueNotes, ensure_values
from tests.support.twin_books import SCHEMA as TWIN_SCHEMA
from tests.support.twin_books import Twin, shapes


def _notes(twin: Twin) -> Any:
    """A new `ValueNotes` of the store (what a process starting on the mirror holds)."""
    if twin.kind == "sqlite":
        return ValueNotes(sqlite_values.SqliteValues(twin.conn))
    return ValueNotes(PgValues(twin.conn, TWIN_SCHEMA))


# -- the contract: both implementations ------------------------------------------------------


def test_refused_and_coerced_values_are_recorded_and_counted(twin: Twin) -> None:
    told: list[tuple[str, str, int]] = []
    notes = _notes(twin)
    notes.on_values = lambda t, outcome, n: told.append((t, outcome, n))
    page = Staged(
        "deals",
        ids=[2],
        refused=[(1, "start_at", "soon?token=s3cret", "not a time")],
        coerced=[(2, "views", "7"), (2, "likes", "3"), (3, "views", "8")],
    )
    with capture_logs() as logs:
        notes.note([page, Staged("images")])
    assert told == [("deals", "refused", 1), ("deals", "coerced", 3)]
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("mirror.value_refused", "error"),
        ("mirror.values_coerced", "info"),
        ("mirror.values_coerced", "info"),
    ]
    assert twin.raw("SELECT type, id, attribute, value, problem, times FROM _sync_refusals") == [
        ("deals", 1, "start_at", "soon?token=***", "not a time", 1)
    ]
    coerced = "SELECT attribute, count, last_id, last_value FROM _sync_coercions ORDER BY 1"
    assert twin.raw(coerced) == [("likes", 1, 2, "3"), ("views", 2, 3, "8")]
    notes.note([Staged("deals", ids=[4], coerced=[(4, "views", "9")])])
    assert twin.raw(coerced) == [("likes", 1, 2, "3"), ("views", 3, 4, "9")]
    faults = notes.faults()
    assert list(faults) == ["deals"]
    assert faults["deals"]["refused"] == 1 and faults["deals"]["coerced"] == 4
    last = faults["deals"]["last_refused"]
    [(at,)] = twin.raw("SELECT last_at FROM _sync_refusals")
    assert last == {
        "id": 1,
        "attribute": "start_at",
        "value": "soon?token=***",
        "problem": "not a time",
        "at": at,
    }


def test_a_row_written_well_later_loses_its_refusal(twin: Twin) -> None:
    notes = _notes(twin)
    notes.note([Staged("deals", ids=[9], refused=[(5, "end_at", "x", "bad")])])
    notes.note([Staged("deals", ids=[9], refused=[(6, "end_at", "y", "bad")])])
    notes.note([Staged("deals", ids=[9], refused=[(5, "end_at", "z", "worse")])])
    notes.note([Staged("stores", ids=[9], refused=[(6, "name", "n", "bad")])])
    held = "SELECT type, id, value, problem, times FROM _sync_refusals ORDER BY type, id"
    assert twin.raw(held) == [
        ("deals", 5, "z", "worse", 2),
        ("deals", 6, "y", "bad", 1),
        ("stores", 6, "n", "bad", 1),
    ]
    notes.note([Staged("deals", ids=[1, 6])])  # deal 6 written well: its refusal is history
    assert twin.raw("SELECT type, id FROM _sync_refusals ORDER BY type, id") == [
        ("deals", 5),
        ("stores", 6),  # another type's row 6 keeps its own
    ]
    again = _notes(twin)  # a new process learns what is held from the table
    again.note([Staged("deals", ids=[5])])
    assert twin.raw("SELECT type, id FROM _sync_refusals") == [("stores", 6)]
    assert list(again.faults()) == ["stores"]


def test_the_last_refused_value_of_a_type_among_ties(twin: Twin) -> None:
    """The latest `last_at`, then the highest id, then the first attribute in byte order."""
    notes = _notes(twin)
    notes.note(
        [
            Staged(
                "deals",
                refused=[
                    (3, "b", "1", "p"),
                    (7, "b", "2", "p"),
                    (7, "a", "3", "p"),
                    (7, "C", "4", "p"),
                ],
            )
        ]
    )
    twin.raw("UPDATE _sync_refusals SET last_at = ?", "2026-01-01T00:00:00.000Z")
    twin.raw("UPDATE _sync_refusals SET last_at = ? WHERE id = 3", "2025-01-01T00:00:00.000Z")
    faults = notes.faults()["deals"]
    assert faults["refused"] == 4
    assert (faults["last_refused"]["id"], faults["last_refused"]["attribute"]) == (7, "C")
    assert faults["last_refused"]["at"] == "2026-01-01T00:00:00.000Z"


def test_notes_roll_back_with_their_page(twin: Twin) -> None:
    notes = _notes(twin)
    with pytest.raises(RuntimeError), twin.atomic():
        notes.note([Staged("deals", refused=[(5, "end_at", "x", "bad")], coerced=[(6, "v", "1")])])
        raise RuntimeError("the page failed")
    assert notes.faults() == {}
    # The memo of refused ids kept 5 (it never shrinks): a clean write of 5 deletes nothing.
    notes.note([Staged("deals", ids=[5])])
    assert notes.faults() == {}


def test_no_faults_on_a_clean_mirror(twin: Twin) -> None:
    notes = _notes(twin)
    notes.note([Staged("deals", ids=[1, 2, 3])])
    assert notes.faults() == {}


def test_faults_of_a_mirror_without_the_tables(twin: Twin) -> None:
    twin.raw("DROP TABLE _sync_coercions")
    assert _notes(twin).faults() == {}


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_tables_have_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Each table as SQLite has it, its keys and stamps compared byte by byte."""
    ensure_values(conn)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        found = shapes(conn, SCHEMA, mirror.conn, list(TABLES))
    finally:
        mirror.close()
    bytewise = {"type", "attribute", "first_at", "last_at"}
    for table, (lite, pg, collated) in found.items():
        assert pg == lite, table
        assert collated == bytewise & {c for c, _ in pg}, table


def test_ensure_is_idempotent_and_keeps_what_is_there(conn: psycopg.Connection[Any]) -> None:
    schema = 'Odd "schema"'
    ensure_values(conn, schema)
    ValueNotes(PgValues(conn, schema)).note([Staged("deals", refused=[(5, "end_at", "x", "bad")])])
    ensure_values(conn, schema)
    assert ValueNotes(PgValues(conn, schema)).faults()["deals"]["refused"] == 1
    assert not exists(conn, values.SCHEMA, "_sync_refusals")  # only the schema given


def test_a_schema_without_the_tables_leaves_the_callers_transaction_usable(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.transaction():
        assert ValueNotes(PgValues(conn, "nowhere")).faults() == {}
        ensure_values(conn)
        ValueNotes(PgValues(conn)).note([Staged("deals", refused=[(5, "end_at", "x", "bad")])])
    assert ValueNotes(PgValues(conn)).faults()["deals"]["refused"] == 1


def test_nul_in_a_value_is_kept_as_a_replacement_character(
    conn: psycopg.Connection[Any],
) -> None:
    ensure_values(conn)
    notes = ValueNotes(PgValues(conn))
    notes.note(
        [Staged("deals", refused=[(5, "end_at", "x\x00y", "bad\x00")], coerced=[(6, "v", "\x00")])]
    )
    last = notes.faults()["deals"]["last_refused"]
    assert (last["value"], last["problem"]) == ("x\ufffdy", "bad\ufffd")
    assert conn.execute(f'SELECT last_value FROM "{SCHEMA}"._sync_coercions').fetchone() == (
        "\ufffd",
    )
