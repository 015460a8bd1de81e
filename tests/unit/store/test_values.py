"""`sync.store.values`: misfit values of a page recorded, counted, and refusals forgotten once clean."""

from __future__ import annotations

from sync.pipeline.batches import Staged
from sync.store import Mirror
from sync.store.values import SqliteValues, ValueNotes
from tests.support.store_units import rows


def test_refused_and_coerced_values_are_recorded_and_counted(mirror: Mirror) -> None:
    told: list[tuple[str, str, int]] = []
    notes = ValueNotes(SqliteValues(mirror.conn))
    notes.on_values = lambda t, outcome, n: told.append((t, outcome, n))
    page = Staged(
        "deals",
        ids=[2],
        refused=[(1, "start_at", "soon", "not a time")],
        coerced=[(2, "views", "7"), (2, "likes", "3"), (3, "views", "8")],
    )
    notes.note([page, Staged("images")])
    assert told == [("deals", "refused", 1), ("deals", "coerced", 3)]
    assert rows(mirror.conn, "SELECT type, id, attribute, value, times FROM _sync_refusals") == [
        ("deals", 1, "start_at", "soon", 1)
    ]
    coerced = "SELECT attribute, count, last_id, last_value FROM _sync_coercions ORDER BY 1"
    assert rows(mirror.conn, coerced) == [("likes", 1, 2, "3"), ("views", 2, 3, "8")]
    faults = notes.faults()["deals"]
    assert (faults["refused"], faults["coerced"]) == (1, 3)
    assert faults["last_refused"]["problem"] == "not a time"


def test_a_row_written_cleanly_later_loses_its_refusal(mirror: Mirror) -> None:
    notes = ValueNotes(SqliteValues(mirror.conn))
    notes.note([Staged("deals", ids=[9], refused=[(5, "end_at", "x", "bad")])])
    notes.note([Staged("deals", ids=[9], refused=[(6, "end_at", "y", "bad")])])
    notes.note([Staged("deals", ids=[9], refused=[(5, "end_at", "z", "worse")])])
    held = "SELECT id, value, problem, times FROM _sync_refusals ORDER BY id"
    assert rows(mirror.conn, held) == [(5, "z", "worse", 2), (6, "y", "bad", 1)]
    notes.note([Staged("deals", ids=[1, 6])])  # row 6 written cleanly: its refusal is history
    assert rows(mirror.conn, "SELECT id FROM _sync_refusals") == [(5,)]
    assert ValueNotes(SqliteValues(mirror.conn)).faults()["deals"]["refused"] == 1
