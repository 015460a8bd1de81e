"""`sync.store.pg.readmemo`: checkpoints and cursors asked in a bulk load's group come from one
read, and are exactly what the server would answer: after this process's own writes, after a
group rolled back, and outside a group (where every ask reads)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sync.store.backfills import BackfillState, PageCheckpoint
from sync.store.pg.mirror import PgMirror
from tests.unit.store.pg.test_pagewrite import SCHEMA, T1, _deal, _deals

SCOPES = [f"mall={i}" for i in range(20)]


@pytest.fixture
def mirror(pg_db: str) -> Iterator[PgMirror]:
    m = PgMirror.open(pg_db, SCHEMA)
    m.write_staged([_deals(_deal(1, T1, "a"))])  # the table exists: no schema change in a group
    yield m
    m.close()


def _direct(m: PgMirror, scope: str) -> BackfillState | None:
    """The state as the server holds it now (no memo)."""
    return m.backfills._read_state(("deals", scope))


def test_a_group_asks_every_checkpoint_once_and_sees_its_own_writes(mirror: PgMirror) -> None:
    b, c = mirror.backfills, mirror.cursors
    b.start("deals", SCOPES[0], page_size=2, started_at=T1)
    c.set("deals", SCOPES[1], "c1")
    mirror.group.start(100)
    mirror.write_staged([_deals(_deal(2, T1, "b"))])  # the group's pipeline is open
    before = b.states.reads, c.memo.reads
    states = [b.begin("deals", s, page_size=2, started_at=T1) for s in SCOPES]
    cursors = [c.get("deals", s) for s in SCOPES]
    # One read of each table, then one again per key written since (the begun scopes).
    assert (b.states.reads - before[0], c.memo.reads - before[1]) == (1, 1)
    assert states[0] == BackfillState(frozenset(), None, 2, T1, None)
    assert states[1:] == [BackfillState(frozenset(), None, 2, T1, None)] * (len(SCOPES) - 1)
    assert cursors == [None, "c1"] + [None] * (len(SCOPES) - 2)
    cp = PageCheckpoint("deals", SCOPES[3], 1, 5)
    mirror.write_staged([_deals(_deal(3, T1, "c"))], checkpoint=cp)
    c.set("deals", SCOPES[4], "c4")
    b.finish("deals", SCOPES[5], finished_at=T1)
    assert b.state("deals", SCOPES[3]) == _direct(mirror, SCOPES[3])
    assert b.state("deals", SCOPES[3]) == BackfillState(frozenset({1}), 5, 2, T1, None)
    assert b.state("deals", SCOPES[5]) == BackfillState(frozenset(), None, 2, T1, T1)
    assert c.get("deals", SCOPES[4]) == "c4"
    for s in SCOPES:
        assert b.state("deals", s) == _direct(mirror, s)
    mirror.group.end()


def test_a_group_rolled_back_forgets_what_was_read_in_it(mirror: PgMirror) -> None:
    """The memo held the group's uncommitted checkpoint: after the rollback it must not say
    the page is done (a page skipped for good: a lost row)."""
    b = mirror.backfills
    b.start("deals", SCOPES[0], page_size=2, started_at=T1)
    mirror.group.start(100)
    cp = PageCheckpoint("deals", SCOPES[0], 1, 5)
    mirror.write_staged([_deals(_deal(2, T1, "b"))], checkpoint=cp)
    state = b.state("deals", SCOPES[0])
    assert state is not None and state.pages_done == {1}
    with pytest.raises(RuntimeError):
        with mirror.group.page():
            raise RuntimeError("a page failed")
    mirror.group.start(100)
    mirror.write_staged([_deals(_deal(3, T1, "c"))])
    assert b.state("deals", SCOPES[0]) == BackfillState(frozenset(), None, 2, T1, None)
    mirror.group.end()


def test_outside_a_group_every_ask_reads(mirror: PgMirror) -> None:
    b = mirror.backfills
    b.start("deals", SCOPES[0], page_size=2, started_at=T1)
    before = b.states.reads
    for _ in range(3):
        b.state("deals", SCOPES[0])
    assert b.states.reads - before == 3
    # Written behind the memo's back by another connection: outside a group, seen at once.
    with mirror.conn.transaction():
        mirror.conn.execute(f'UPDATE "{SCHEMA}"._sync_backfill SET finished_at = %s', (T1,))
    state = b.state("deals", SCOPES[0])
    assert state is not None and state.finished_at == T1
