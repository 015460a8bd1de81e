"""`sync.store.pg.backfills`: the PostgreSQL backfill checkpoints held to the SQLite ones' contract.

The contract tests take `twin` and run twice (`tests.support.twin_books`): `sqlite` is
`sync.store.backfills.Backfills` on an SQLite mirror, `postgres` this module's `Backfills` on a
PostgreSQL schema made by `ensure_backfills`, each over its own store's `Meta`. Each asserts the
same of both: a backfill started, resumed and restarted; a checkpoint committed or rolled back
with its page's rows; the types completed (recorded, or derived from cursors and finished
checkpoints) kept through a reset, in the same record; a run's sign of life. The tests after
them are PostgreSQL's own: the tables' shape against SQLite's, `ensure_backfills`, a caller's
transaction, and NUL in text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.model.stamps import CANONICAL
from sync.store import Mirror
from sync.store import backfills as sqlite_backfills
from sync.store.backfills import COMPLETED_KEY, STARTED_KEY, BackfillState, PageCheckpoint
from sync.store.pg import backfills
from sync.store.pg.backfills import TABLES, Backfills, ensure_backfills
from sync.store.pg.bookkeeping import Meta, exists
from tests.support.twin_books import Twin, shapes

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _backfills(twin: Twin) -> Any:
    """The store's `Backfills` over its own `Meta`."""
    if twin.kind == "sqlite":
        return sqlite_backfills.Backfills(twin.conn, twin.meta)
    return Backfills(twin.conn, twin.meta)


def _deal(rid: int, title: str = "t") -> dict[str, Any]:
    return {"id": str(rid), "type": "deals", "attributes": {"title": title, "updated_at": T0}}


# -- the contract: both implementations ------------------------------------------------------


def test_start_resume_and_restart(twin: Twin) -> None:
    b = _backfills(twin)
    assert b.state("deals", "") is None
    b.start("deals", "", page_size=50, started_at="t0")
    with twin.atomic():
        b.checkpoint(PageCheckpoint("deals", "", 1, 4))
        b.checkpoint(PageCheckpoint("deals", "", 2, 3))  # a lower last never lowers it
        b.checkpoint(PageCheckpoint("deals", "", 2, 4))  # a page twice is one page
    assert b.state("deals", "") == BackfillState(frozenset({1, 2}), 4, 50, "t0", None)
    b.start("deals", "", page_size=50, started_at="t1")  # resumed: the pages stay
    assert b.state("deals", "") == BackfillState(frozenset({1, 2}), 4, 50, "t0", None)
    assert b.state("deals", "mall=1") is None and b.state("stores", "") is None
    b.start("deals", "", page_size=100, started_at="t2")  # another page size: afresh
    assert b.state("deals", "") == BackfillState(frozenset(), None, 100, "t2", None)


def test_begin_says_finished_resumes_or_starts_afresh_and_returns_the_state(twin: Twin) -> None:
    """`begin` is `state`, then `start` unless finished, then `state` again, in one read: the
    state it returns is the one the mirror then holds."""
    b = _backfills(twin)
    assert b.begin("deals", "", page_size=50, started_at="t0") == BackfillState(
        frozenset(), None, 50, "t0", None
    )
    assert b.state("deals", "") == BackfillState(frozenset(), None, 50, "t0", None)
    with twin.atomic():
        b.checkpoint(PageCheckpoint("deals", "", 1, 4))
        b.checkpoint(PageCheckpoint("deals", "", 3, 4))
    resumed = BackfillState(frozenset({1, 3}), 4, 50, "t0", None)
    assert b.begin("deals", "", page_size=50, started_at="t1") == resumed
    assert b.state("deals", "") == resumed
    afresh = BackfillState(frozenset(), None, 100, "t2", None)  # another page size
    assert b.begin("deals", "", page_size=100, started_at="t2") == afresh
    assert b.state("deals", "") == afresh
    b.checkpoint(PageCheckpoint("deals", "", 1, 1))
    b.finish("deals", "", finished_at="t9")
    assert b.begin("deals", "", page_size=100, started_at="t3") is None  # finished: kept
    assert b.state("deals", "") == BackfillState(frozenset({1}), 1, 100, "t2", "t9")


def test_a_finished_backfill_starts_afresh(twin: Twin) -> None:
    b = _backfills(twin)
    b.start("deals", "", page_size=50, started_at="t0")
    b.checkpoint(PageCheckpoint("deals", "", 1, 1))
    b.finish("deals", "", finished_at="t9")
    assert b.state("deals", "") == BackfillState(frozenset({1}), 1, 50, "t0", "t9")
    b.start("deals", "", page_size=50, started_at="t10")
    assert b.state("deals", "") == BackfillState(frozenset(), None, 50, "t10", None)


def test_each_scope_has_its_own_checkpoints(twin: Twin) -> None:
    b = _backfills(twin)
    b.start("stores", "mall=1", page_size=50, started_at="t0")
    b.start("stores", "mall=2", page_size=50, started_at="t0")
    b.checkpoint(PageCheckpoint("stores", "mall=1", 3, 3))
    b.checkpoint(PageCheckpoint("stores", "mall=9", 1, 1))  # a scope never started: no last
    assert b.state("stores", "mall=1") == BackfillState(frozenset({3}), 3, 50, "t0", None)
    assert b.state("stores", "mall=2") == BackfillState(frozenset(), None, 50, "t0", None)
    assert b.state("stores", "mall=9") is None
    b.start("stores", "mall=1", page_size=10, started_at="t1")  # restarts only its own scope
    assert b.state("stores", "mall=2") == BackfillState(frozenset(), None, 50, "t0", None)


def test_a_checkpoint_commits_and_rolls_back_with_its_page(twin: Twin) -> None:
    """Written in the page's transaction: a page that fails takes its checkpoint with it, so a
    resumed backfill asks for that page again; one that commits keeps both."""
    b = _backfills(twin)
    b.start("deals", "", page_size=50, started_at="t0")
    twin.write("deals", [_deal(1)], ())
    with pytest.raises(RuntimeError, match="the page failed"), twin.atomic():
        twin.write("deals", [_deal(2)], ())
        b.checkpoint(PageCheckpoint("deals", "", 1, 3))
        raise RuntimeError("the page failed")
    assert b.state("deals", "") == BackfillState(frozenset(), None, 50, "t0", None)
    assert twin.raw("SELECT id FROM deals ORDER BY id") == [(1,)]
    with twin.atomic():
        twin.write("deals", [_deal(2)], ())
        b.checkpoint(PageCheckpoint("deals", "", 1, 3))
    assert b.state("deals", "") == BackfillState(frozenset({1}), 3, 50, "t0", None)
    assert twin.raw("SELECT id FROM deals ORDER BY id") == [(1,), (2,)]


def test_started_types_are_sorted_and_distinct(twin: Twin) -> None:
    b = _backfills(twin)
    assert b.started_types() == []
    for name, scope in (("stores", "mall=2"), ("deals", ""), ("stores", "mall=1"), ("B", "")):
        b.start(name, scope, page_size=50, started_at="t0")
    assert b.started_types() == ["B", "deals", "stores"]


def test_completed_types_survive_a_reset(twin: Twin) -> None:
    b = _backfills(twin)
    b.type_completed("deals", T1)
    b.start("stores", "mall=1", page_size=50, started_at="t0")
    b.start("stores", "mall=2", page_size=50, started_at="t0")
    b.finish("stores", "mall=1", finished_at=T1)
    b.finish("stores", "mall=2", finished_at=T2)  # every scope finished: completed, at the last
    b.start("malls", "", page_size=50, started_at="t0")  # started, never finished: not completed
    twin.cursors.set("events", "", "c")  # a poll cursor: completed by an older sync
    twin.cursors.set("deletions", "", "c")  # the deletions feed is not a type
    twin.meta.set(STARTED_KEY, "t0")
    done = b.completed_types()
    assert list(done) == ["deals", "events", "stores"]  # the record's, then as derived
    assert done["deals"] == T1 and done["stores"] == T2 and CANONICAL.fullmatch(done["events"])
    b.reset()
    assert b.state("stores", "mall=1") is None and b.state("malls", "") is None
    assert b.started_types() == [] and twin.meta.get(STARTED_KEY) is None
    assert b.completed_types() == done
    assert twin.meta.get(COMPLETED_KEY) == sqlite_backfills.completed_record(done)


def test_a_damaged_record_counts_as_none(twin: Twin) -> None:
    b = _backfills(twin)
    for damaged in ("not json", "[1, 2]", "7"):
        twin.meta.set(COMPLETED_KEY, damaged)
        assert b.completed_types() == {}, damaged
    b.type_completed("deals", T1)  # a damaged record starts again
    assert twin.meta.get(COMPLETED_KEY) == '{"deals": "2026-01-02T00:00:00.000Z"}'


def test_a_reset_inside_a_transaction_rolled_back_leaves_everything(twin: Twin) -> None:
    b = _backfills(twin)
    b.start("deals", "", page_size=50, started_at="t0")
    b.checkpoint(PageCheckpoint("deals", "", 1, 2))
    twin.meta.set(STARTED_KEY, "t0")
    with pytest.raises(RuntimeError), twin.atomic():
        b.reset()
        assert b.state("deals", "") is None
        raise RuntimeError("stopped")
    assert b.state("deals", "") == BackfillState(frozenset({1}), 2, 50, "t0", None)
    assert twin.meta.get(STARTED_KEY) == "t0" and twin.meta.get(COMPLETED_KEY) is None


def test_type_completed_is_a_sign_of_life_of_the_run(twin: Twin) -> None:
    run = twin.runs.start("backfill")
    twin.raw("UPDATE _sync_runs SET seen_at = 'long ago' WHERE id = ?", run)
    _backfills(twin).type_completed("deals", T1)
    [(seen,)] = twin.raw("SELECT seen_at FROM _sync_runs WHERE id = ?", run)
    assert seen != "long ago" and CANONICAL.fullmatch(seen)


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_tables_have_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Each table as SQLite has it, its keys and stamps compared byte by byte."""
    ensure_backfills(conn)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        found = shapes(conn, backfills.SCHEMA, mirror.conn, list(TABLES))
    finally:
        mirror.close()
    for table, (lite, pg, bytewise) in found.items():
        assert pg == lite, table
        assert bytewise == {"type", "scope", "started_at", "finished_at"} & {c for c, _ in pg}


def test_ensure_is_idempotent_keeps_what_is_there_and_makes_the_books_it_reads(
    conn: psycopg.Connection[Any],
) -> None:
    schema = 'Odd "schema"'
    ensure_backfills(conn, schema)
    b = Backfills(conn, Meta(conn, schema))
    b.start("deals", "", page_size=50, started_at="t0")
    ensure_backfills(conn, schema)
    assert b.state("deals", "") == BackfillState(frozenset(), None, 50, "t0", None)
    assert all(exists(conn, schema, t) for t in ("_sync_meta", "_sync_cursors", "_sync_runs"))
    assert not exists(conn, backfills.SCHEMA, "_sync_backfill")  # only the schema given


def test_the_schema_is_the_metas(pg_db: str) -> None:
    """Two schemas, one database: each `Backfills` reads and writes its own `Meta`'s."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        for schema in ("one", "two"):
            ensure_backfills(c, schema)
        one, two = Backfills(c, Meta(c, "one")), Backfills(c, Meta(c, "two"))
        one.start("deals", "", page_size=50, started_at="t0")
        one.type_completed("deals", T1)
        assert two.state("deals", "") is None and two.started_types() == []
        assert two.completed_types() == {} and one.completed_types() == {"deals": T1}


def test_started_types_of_a_schema_without_the_table_in_a_transaction(
    conn: psycopg.Connection[Any],
) -> None:
    """SQLite catches the error of a missing table; here the catalogue is asked instead, and
    the caller's transaction goes on."""
    with conn.transaction():
        assert Backfills(conn, Meta(conn, "nowhere")).started_types() == []
        ensure_backfills(conn)
        Meta(conn).set("k", "v")
    assert Meta(conn).get("k") == "v"


def test_a_caller_without_autocommit_commits_the_checkpoints(pg_db: str) -> None:
    with psycopg.connect(pg_db) as c, psycopg.connect(pg_db, autocommit=True) as other:
        ensure_backfills(c)
        c.commit()
        b = Backfills(c, Meta(c))
        b.start("deals", "", page_size=50, started_at="t0")  # a savepoint in psycopg's
        b.checkpoint(PageCheckpoint("deals", "", 1, 1))
        assert Backfills(other, Meta(other)).state("deals", "") is None
        c.commit()
        assert Backfills(other, Meta(other)).state("deals", "") == BackfillState(
            frozenset({1}), 1, 50, "t0", None
        )


def test_nul_in_a_type_or_scope_is_kept_as_a_replacement_character(
    conn: psycopg.Connection[Any],
) -> None:
    ensure_backfills(conn)
    b = Backfills(conn, Meta(conn))
    b.start("de\x00als", "s\x00", page_size=5, started_at="t\x00")
    b.checkpoint(PageCheckpoint("de\x00als", "s\x00", 1, 1))
    b.finish("de\x00als", "s\x00", finished_at="t\x00")
    state = b.state("de\ufffdals", "s\ufffd")
    assert state == BackfillState(frozenset({1}), 1, 5, "t\ufffd", "t\ufffd")
    assert b.started_types() == ["de\ufffdals"]


def test_a_checkpoint_that_changes_nothing_rewrites_no_row(conn: psycopg.Connection[Any]) -> None:
    """Every page of a listing says the same `last`: the scope's row is updated when it grows,
    not on every page (an UPDATE that changes nothing still leaves a dead tuple)."""
    ensure_backfills(conn)
    b = Backfills(conn, Meta(conn))
    b.start("deals", "", page_size=50, started_at="t0")

    def version() -> str:
        row = conn.execute("SELECT xmin::text FROM ccsync._sync_backfill").fetchone()
        assert row is not None
        return str(row[0])

    b.checkpoint(PageCheckpoint("deals", "", 1, 3))
    first = version()
    b.checkpoint(PageCheckpoint("deals", "", 2, 3))
    b.checkpoint(PageCheckpoint("deals", "", 3, 2))
    assert version() == first
    b.checkpoint(PageCheckpoint("deals", "", 4, 5))
    assert version() != first
    assert b.state("deals", "") == BackfillState(frozenset({1, 2, 3, 4}), 5, 50, "t0", None)
