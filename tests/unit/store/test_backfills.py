"""`sync.store.backfills`: backfill checkpoints and the types ever completed."""

from __future__ import annotations

from sync.store import BackfillState, Mirror, PageCheckpoint
from sync.store.backfills import COMPLETED_KEY


def test_start_resume_and_restart(mirror: Mirror) -> None:
    b = mirror.backfills
    assert b.state("deals", "") is None
    b.start("deals", "", page_size=50, started_at="t0")
    mirror.conn.execute("BEGIN")
    b.checkpoint(PageCheckpoint("deals", "", 1, 4))
    b.checkpoint(PageCheckpoint("deals", "", 2, 3))
    mirror.conn.execute("COMMIT")
    assert b.state("deals", "") == BackfillState(frozenset({1, 2}), 4, 50, "t0", None)
    b.start("deals", "", page_size=50, started_at="t1")  # resumed: the pages stay
    assert b.state("deals", "") == BackfillState(frozenset({1, 2}), 4, 50, "t0", None)
    b.start("deals", "", page_size=100, started_at="t2")  # another page size: afresh
    assert b.state("deals", "") == BackfillState(frozenset(), None, 100, "t2", None)


def test_a_finished_backfill_starts_afresh(mirror: Mirror) -> None:
    b = mirror.backfills
    b.start("deals", "", page_size=50, started_at="t0")
    b.finish("deals", "", finished_at="t9")
    state = b.state("deals", "")
    assert state is not None and state.finished_at == "t9"
    b.start("deals", "", page_size=50, started_at="t10")
    state = b.state("deals", "")
    assert state is not None and state.finished_at is None and state.started_at == "t10"


def test_completed_types_survive_a_reset(mirror: Mirror) -> None:
    b = mirror.backfills
    b.type_completed("deals", "t1")
    b.start("stores", "mall=1", page_size=50, started_at="t0")
    b.finish("stores", "mall=1", finished_at="t2")  # every scope finished: completed too
    mirror.cursors.set("events", "", "c")  # a poll cursor: completed by an older sync
    mirror.meta.set("backfill_started_at", "t0")
    assert set(b.completed_types()) == {"deals", "stores", "events"}
    b.reset()
    assert b.state("stores", "mall=1") is None
    assert mirror.meta.get("backfill_started_at") is None
    assert set(b.completed_types()) >= {"deals", "stores", "events"}
    assert "stores" in (mirror.meta.get(COMPLETED_KEY) or "")


def test_type_completed_is_a_sign_of_life_of_the_run(mirror: Mirror) -> None:
    run = mirror.runs.start("backfill")
    mirror.conn.execute("UPDATE _sync_runs SET seen_at = 'long ago' WHERE id = ?", (run,))
    mirror.backfills.type_completed("deals", "t1")
    seen = mirror.conn.execute("SELECT seen_at FROM _sync_runs WHERE id = ?", (run,)).fetchone()
    assert seen[0] != "long ago"
