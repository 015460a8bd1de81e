"""`sync.store.changes`: the feed's triggers say what changed, reads page by seq, pruning is remembered."""

from __future__ import annotations

import sqlite3

from sync.store import Mirror, changes
from sync.store.changes import Change
from tests.support.store_units import rows

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


def _jobs(mirror: Mirror) -> sqlite3.Connection:
    mirror.schema.ensure_content(
        "job_listings", {"id": 1, "title": "a", "updated_at": T0, "store_id": 5}
    )
    return mirror.conn


def _ops(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return rows(conn, "SELECT type, id, op, updated_at FROM _sync_changes ORDER BY seq")


def test_each_kind_of_change_gets_its_own_entry_and_a_same_copy_none(mirror: Mirror) -> None:
    conn = _jobs(mirror)
    conn.execute(
        "INSERT INTO job_listings (id, title, updated_at, store_id) VALUES (1, 'a', ?, 5)", (T0,)
    )
    conn.execute("UPDATE job_listings SET title = 'a', store_id = 5 WHERE id = 1")  # same copy
    conn.execute("UPDATE job_listings SET title = 'b' WHERE id = 1")  # content, same stamp
    conn.execute("UPDATE job_listings SET store_id = 6 WHERE id = 1")  # linkage only
    conn.execute("UPDATE job_listings SET title = 'c', updated_at = ? WHERE id = 1", (T1,))
    conn.execute("DELETE FROM job_listings WHERE id = 1")
    assert _ops(conn) == [
        ("job_listings", 1, "upsert", T0),
        ("job_listings", 1, "repair", T0),
        ("job_listings", 1, "links", T0),
        ("job_listings", 1, "upsert", T1),
        ("job_listings", 1, "delete", T1),
    ]


def test_a_table_without_stamps_logs_updates_that_differ(mirror: Mirror) -> None:
    mirror.schema.ensure_content("tags", {"id": 1, "name": "x"})
    conn = mirror.conn
    conn.execute("INSERT INTO tags (id, name) VALUES (1, 'x')")
    conn.execute("UPDATE tags SET name = 'x' WHERE id = 1")
    conn.execute("UPDATE tags SET name = 'y' WHERE id = 1")
    assert _ops(conn) == [("tags", 1, "upsert", None), ("tags", 1, "upsert", None)]


def test_a_column_added_later_gets_triggers_that_watch_it(mirror: Mirror) -> None:
    conn = _jobs(mirror)
    conn.execute("INSERT INTO job_listings (id, title, updated_at) VALUES (1, 'a', ?)", (T0,))
    mirror.schema.ensure_content("job_listings", {"id": 1, "salary": "x"})
    conn.execute("UPDATE job_listings SET salary = 'high' WHERE id = 1")
    assert [r[2] for r in _ops(conn)] == ["upsert", "repair"]


def test_read_filters_by_type_and_bounds_and_backfill_notes_one_entry_a_type(
    mirror: Mirror,
) -> None:
    conn = mirror.conn
    changes.note_backfill(conn, ["deals", "stores", "deals"])
    seqs = [c.seq for c in changes.read(conn, 0, 10)]
    assert len(seqs) == 3 and changes.last_seq(conn) == seqs[-1]
    picked = changes.read(conn, seqs[0], 10, types=["deals"])
    assert [(c.seq, c.type, c.id, c.op) for c in picked] == [(seqs[2], "deals", None, "backfill")]
    assert [c.seq for c in changes.read(conn, 0, 10, upto=seqs[1])] == seqs[:2]
    assert [c.seq for c in changes.read(conn, 0, 1)] == seqs[:1]


def test_pruning_drops_old_entries_remembers_the_last_and_numbers_go_on(mirror: Mirror) -> None:
    conn = mirror.conn
    changes.note_backfill(conn, ["deals", "stores", "malls"])
    conn.execute("UPDATE _sync_changes SET at = '2020-01-01T00:00:00.000Z' WHERE type != 'malls'")
    first, second, third = (c.seq for c in changes.read(conn, 0, 10))
    assert changes.prune(conn, keep_days=1) == 2
    assert changes.pruned_through(conn) == second
    assert [c.seq for c in changes.read(conn, 0, 10)] == [third]
    assert changes.prune(conn, keep_days=1) == 0
    conn.execute("DELETE FROM _sync_changes")
    changes.note_backfill(conn, ["deals"])
    assert changes.last_seq(conn) == third + 1  # AUTOINCREMENT: never a number again


def test_a_change_prints_as_the_command_does() -> None:
    c = Change(7, "deals", 3, "upsert", T0, T1)
    assert c.line() == f"7\tdeals\t3\tupsert\t{T0}"
    assert Change(8, "*", None, "pruned", None, None).line() == "8\t*\t\tpruned\t"
    assert c.line(as_json=True) == (
        '{"seq": 7, "type": "deals", "id": 3, "op": "upsert", '
        f'"updated_at": "{T0}", "at": "{T1}"}}'
    )
