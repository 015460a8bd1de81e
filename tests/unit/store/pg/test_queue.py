"""`sync.store.pg.queue`: the PostgreSQL change queue held to the SQLite one's contract.

The contract tests take `store` and run twice: `sqlite` is a `Mirror` opened on a file in the
test's directory (`mirror.queue`), `postgres` the classes of this module on a fresh database
(`pg_db`, autocommit) in a schema with an awkward name, with a `_sync_queue` of other rows in
`public` (a statement that forgot its schema reads them and fails). Each asserts the same of
both: what an enqueue commits, claim and take order, lanes, retry and ack, waiting counts, a
reopen after a crash. `Store.raw` reaches the table behind the parts' backs with one statement
written once for both. The tests after them are PostgreSQL's own: the table's shape against
SQLite's, two takers at once, a notice arriving while its id is being taken, a process killed
mid-fetch, two receivers at once, and the one difference (NUL in text).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.model.notices import WebhookNotice
from sync.store import Mirror
from sync.store.pg import queue as pg_queue
from sync.store.pg.bookkeeping import ensure_bookkeeping, exists
from sync.store.pg.hours import ensure_hours
from sync.store.pg.press import ensure_press
from sync.store.pg.proof import ensure_proof
from sync.store.pg.queue import ChangeQueue, QueueTable, ensure_queue
from sync.store.queue import ERROR_CHARS, QueueItem, items_of
from tests.support.rawsql import pg_rolled_back, pg_run, sqlite_rolled_back

#: The PostgreSQL schema of these tests: quoted wherever it is named.
SCHEMA = 'Queue "q"'
T0 = "2026-01-01T00:00:00.000Z"
#: SQLite's declared type -> the type PostgreSQL's column has.
AFFINITY = {"INTEGER": "bigint", "TEXT": "text"}


def _notice(kind: str, type_name: str | None, rid: int) -> WebhookNotice:
    return WebhookNotice(kind, type_name, type_name or "widgets", rid)  # type: ignore[arg-type]


def _updates(type_name: str, *ids: int) -> list[WebhookNotice]:
    return [_notice("update", type_name, i) for i in ids]


@dataclass
class Store:
    """One implementation's queue, and what a test needs behind it."""

    kind: str
    #: The mirror's `QueueTable` (`waiting`, `lanes`, `open`).
    table: Any
    #: One statement on `_sync_queue` (named bare, `?` placeholders) on the parts' connection.
    raw: Callable[..., list[tuple[Any, ...]]]
    #: The same on another connection: what is committed.
    committed: Callable[..., list[tuple[Any, ...]]]
    #: A transaction the block's writes are made in, rolled back at its end.
    rolled_back: Callable[[], contextlib.AbstractContextManager[None]]
    #: Whether `_sync_queue` exists.
    has_table: Callable[[], bool]

    def open(self) -> Any:
        """The queue as a daemon opens it once per run (a restart, when opened again)."""
        return self.table.open()


def _sqlite(tmp_path: Path) -> Iterator[Store]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn = mirror.conn

    def raw(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        rows = [tuple(r) for r in conn.execute(statement, params).fetchall()]
        conn.commit()
        return rows

    def committed(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        other = sqlite3.connect(f"file:{tmp_path / 'm.db'}?mode=ro", uri=True)
        try:
            return [tuple(r) for r in other.execute(statement, params).fetchall()]
        finally:
            other.close()

    rolled_back = sqlite_rolled_back(conn)

    def has_table() -> bool:
        return bool(committed("SELECT 1 FROM sqlite_master WHERE name = '_sync_queue'"))

    try:
        yield Store("sqlite", mirror.queue, raw, committed, rolled_back, has_table)
    finally:
        mirror.close()


def _run(conn: psycopg.Connection[Any], statement: str, params: Any) -> list[tuple[Any, ...]]:
    return pg_run(conn, SCHEMA, "_sync_queue", statement, params)


def _decoy(conn: psycopg.Connection[Any]) -> None:
    """`public._sync_queue`, holding notices the tests never enqueue."""
    conn.execute(
        "CREATE TABLE public._sync_queue (id bigint PRIMARY KEY, kind text, type_name text,"
        " resource_id bigint, received_at text, attempts bigint DEFAULT 0, last_error text,"
        " delivery bigint DEFAULT 0, taken bigint DEFAULT 0)"
    )
    conn.execute(
        "INSERT INTO public._sync_queue (id, kind, type_name, resource_id, delivery)"
        " SELECT g, 'update', 'deals', 9000 + g, 900 FROM generate_series(1, 50) g"
    )


def _postgres(dsn: str) -> Iterator[Store]:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        psycopg.connect(dsn, autocommit=True) as other,
    ):
        _decoy(conn)

        rolled_back = pg_rolled_back(conn)

        yield Store(
            "postgres",
            QueueTable(conn, SCHEMA),
            lambda statement, *params: _run(conn, statement, params),
            lambda statement, *params: _run(other, statement, params),
            rolled_back,
            lambda: exists(other, SCHEMA, "_sync_queue"),
        )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The queue of either mirror, its table not yet made (the PostgreSQL server is started
    only for the `postgres` runs)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_db"))


# -- the contract: both implementations ------------------------------------------------------


def test_reads_make_nothing_and_count_nothing_before_the_daemon_ran(store: Store) -> None:
    assert store.table.waiting() == 0 and store.table.lanes() == []
    assert not store.has_table()
    queue = store.open()
    assert store.has_table()
    assert store.table.waiting() == 0 and store.table.lanes() == [] and queue.depth() == 0


def test_an_enqueue_is_committed_when_it_returns_and_unknown_types_are_left_out(
    store: Store,
) -> None:
    queue = store.open()
    n = queue.enqueue(
        [
            _notice("update", "deals", 1),
            _notice("update", None, 2),
            _notice("deletion", "stores", 3),
        ]
    )
    assert n == 2
    # another connection (a crash right after the 202) sees them already
    assert store.committed(
        "SELECT kind, type_name, resource_id, attempts, taken, last_error FROM _sync_queue"
        " ORDER BY id"
    ) == [("update", "deals", 1, 0, 0, None), ("deletion", "stores", 3, 0, 0, None)]
    stamps = store.raw("SELECT received_at FROM _sync_queue")
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s) for (s,) in stamps)
    assert queue.enqueue([_notice("update", None, 4)]) == 0
    assert queue.enqueue([]) == 0
    assert queue.depth() == 2 and store.table.waiting() == 2


def test_claims_take_the_oldest_ids_of_one_kind_and_type(store: Store) -> None:
    queue = store.open()
    queue.enqueue(_updates("deals", 5, 3, 5, 9, 3, 7))
    queue.enqueue([_notice("deletion", "deals", 5), _notice("update", "events", 1)])
    assert queue.types_pending("update") == ["deals", "events"]
    assert queue.types_pending("deletion") == ["deals"]
    assert queue.types_pending("nothing") == []
    items = queue.claim("update", "deals", limit=2)
    # an id notified again while it waits adds no row
    assert [(i.resource_id, len(i.row_ids)) for i in items] == [(5, 1), (3, 1)]
    assert all(isinstance(i, QueueItem) and i.kind == "update" for i in items)
    queue.ack(items)
    assert [i.resource_id for i in queue.claim("update", "deals", limit=0)] == []
    assert [i.resource_id for i in queue.claim("update", "deals", limit=-1)] == [9, 7]
    assert queue.claim("update", "deals") == []  # all taken
    assert [i.resource_id for i in queue.claim("deletion", "deals")] == [5]
    assert queue.depth() == 4


def test_a_failure_keeps_the_item_counts_the_attempt_and_clips_the_error(store: Store) -> None:
    queue = store.open()
    queue.enqueue(_updates("deals", 1))
    (item,) = queue.claim("update", "deals")
    queue.fail([item], "x" * 900)
    queue.fail([item], "timeout")
    assert store.raw("SELECT attempts, last_error, taken FROM _sync_queue") == [(2, "timeout", 0)]
    queue.fail([item], "y" * 900)
    assert store.raw("SELECT length(last_error) FROM _sync_queue") == [(ERROR_CHARS,)]
    assert queue.claim("update", "deals") == [item]
    store.open()  # a restart: the table and its rows stay
    assert queue.depth() == 1
    queue.fail([], "nothing")  # no items: nothing changes
    queue.ack([])
    assert store.raw("SELECT attempts FROM _sync_queue") == [(3,)]


def test_an_id_notified_again_while_it_waits_adds_no_row_and_moves_to_the_newer_lane(
    store: Store,
) -> None:
    """#50: a delivery sent twice costs nothing more; an id a small delivery names again is
    served in that delivery's lane, not at the end of the giant one it was in."""
    queue = store.open()
    big, small = queue.open_delivery(), queue.open_delivery()
    assert small == big + 1
    assert queue.enqueue(_updates("deals", *range(1, 301)), big) == 300
    assert queue.enqueue(_updates("deals", *range(1, 301)), big) == 300
    assert queue.depth() == 300
    queue.enqueue(_updates("deals", 250), small)
    assert queue.depth() == 300
    assert sorted(store.table.lanes()) == [1, 299]
    first, second, third = (queue.take("deals", limit=100) for _ in range(3))
    big_lane = [i for i in range(300, 0, -1) if i != 250]  # newest first (#47)
    assert [i.resource_id for i in first] == big_lane[:100]
    assert [i.resource_id for i in second] == [250]  # the small lane's turn
    assert [i.resource_id for i in third] == big_lane[100:200]
    assert store.raw("SELECT delivery FROM _sync_queue WHERE resource_id = 250") == [(small,)]


def test_lanes_are_served_in_turn_by_delivery_then_kind(store: Store) -> None:
    queue = store.open()
    a, b = queue.open_delivery(), queue.open_delivery()
    queue.enqueue(_updates("deals", 1, 2, 3), a)
    queue.enqueue([_notice("deletion", "deals", 9)], a)
    queue.enqueue(_updates("deals", 4), b)
    queue.enqueue(_updates("events", 7), b)  # another type: its own turns
    assert sorted(store.table.lanes()) == [1, 1, 1, 3]
    served = [[(i.kind, i.resource_id) for i in queue.take("deals", limit=2)] for _ in range(5)]
    assert served == [
        [("deletion", 9)],  # lane (a, deletion) before (a, update): kinds in byte order
        [("update", 3), ("update", 2)],
        [("update", 4)],
        [("update", 1)],  # round again
        [],
    ]
    assert [i.resource_id for i in queue.take("events", limit=-1)] == [7]  # no limit


def test_a_change_notified_while_its_id_is_taken_is_kept_for_another_fetch(store: Store) -> None:
    """The row being fetched is not matched by the dedupe: its `ack` must not take the newer
    notice with it. Taken rows wait again on `fail`, `release` and a reopened queue."""
    queue = store.open()
    queue.enqueue(_updates("deals", 1))
    queue.enqueue([_notice("deletion", "deals", 2)])
    (taken,) = queue.take("deals")
    queue.enqueue(_updates("deals", 1))  # a newer change, mid-fetch
    assert queue.depth() == 3
    queue.ack([taken])
    assert [(i.kind, i.resource_id) for i in queue.take("deals")] == [("deletion", 2)]
    assert [(i.kind, i.resource_id) for i in queue.take("deals")] == [("update", 1)]
    assert queue.take("deals") == []  # both taken
    queue.release("deals")
    assert len(queue.take("deals")) == 1
    reopened = store.open()  # a restart: nothing is in flight
    assert len(reopened.take("deals")) + len(reopened.take("deals")) == 2


def test_a_reopen_after_a_crash_gives_back_what_was_taken_and_numbers_lanes_on(
    store: Store,
) -> None:
    queue = store.open()
    lane = queue.open_delivery()
    queue.enqueue(_updates("deals", 1, 2), lane)
    queue.enqueue(_updates("events", 3))
    taken = queue.take("deals") + queue.take("events")
    assert len(taken) == 3 and store.raw("SELECT count(*) FROM _sync_queue WHERE taken != 0") == [
        (3,)
    ]
    # the process dies here: nothing acked, nothing failed
    again = store.open()
    assert store.raw("SELECT count(*) FROM _sync_queue WHERE taken != 0") == [(0,)]
    assert again.open_delivery() == lane + 2  # after the highest lane the table holds
    assert sorted(i.resource_id for i in again.take("deals")) == [1, 2]
    assert [i.resource_id for i in again.claim("update", "events")] == [3]


def test_release_makes_only_that_types_taken_rows_wait_again(store: Store) -> None:
    queue = store.open()
    queue.enqueue(_updates("deals", 1) + _updates("events", 2))
    queue.take("deals")
    queue.take("events")
    queue.release("deals")
    assert store.raw("SELECT type_name, taken FROM _sync_queue ORDER BY id") == [
        ("deals", 0),
        ("events", 1),
    ]


def test_ack_removes_only_the_items_rows(store: Store) -> None:
    queue = store.open()
    queue.enqueue(_updates("deals", 1, 2, 3))
    items = queue.claim("update", "deals", limit=2)
    queue.ack(items[:1])
    assert store.raw("SELECT resource_id, taken FROM _sync_queue ORDER BY id") == [(2, 1), (3, 0)]
    assert store.table.waiting() == 2


def test_answered_removes_only_waiting_updates_of_those_ids_received_before_the_ask(
    store: Store,
) -> None:
    """#47: what a poll page served after the notice was received needs no fetch of its own;
    a deletion, a notice the worker has taken, another id, or one received at the ask or after
    stays, and a notice received again while it waits counts from then."""
    queue = store.open()
    queue.enqueue(_updates("deals", 1, 2, 3, 4, 5))
    queue.enqueue([_notice("deletion", "deals", 1), _notice("update", "events", 1)])
    store.raw("UPDATE _sync_queue SET received_at = ?", T0)
    (taken,) = queue.claim("update", "deals", limit=1)  # id 1: its fetch under way
    queue.enqueue(_updates("deals", 4))  # received again, now
    asked = "2026-01-01T00:00:01.000Z"
    assert queue.answered("deals", [1, 2, 4, 6, 2], asked) == 1  # only 2
    assert queue.answered("deals", [3], T0) == 0  # received at the ask
    assert queue.answered("deals", [], asked) == 0
    left = store.raw(
        "SELECT kind, type_name, resource_id FROM _sync_queue ORDER BY kind, type_name, resource_id"
    )
    assert left == [
        ("deletion", "deals", 1),
        ("update", "deals", 1),
        ("update", "deals", 3),
        ("update", "deals", 4),
        ("update", "deals", 5),
        ("update", "events", 1),
    ]
    queue.ack([taken])


def test_every_waiting_row_of_an_id_is_one_item(store: Store) -> None:
    """A queue written before the dedupe holds several rows of one id: one item takes them all,
    and its ack removes them all."""
    queue = store.open()
    queue.enqueue(_updates("deals", 1, 2))
    store.raw(
        "INSERT INTO _sync_queue (kind, type_name, resource_id, received_at, delivery)"
        " VALUES ('update', 'deals', 1, ?, 1), ('update', 'deals', 1, ?, 0)",
        T0,
        T0,
    )
    items = queue.claim("update", "deals")
    assert [(i.resource_id, len(i.row_ids)) for i in items] == [(1, 3), (2, 1)]
    assert list(items[0].row_ids) == sorted(items[0].row_ids)
    queue.ack(items)
    assert queue.depth() == 0


def test_an_enqueue_inside_a_callers_transaction_goes_with_it(store: Store) -> None:
    queue = store.open()
    with store.rolled_back():
        queue.enqueue(_updates("deals", 1))
        assert queue.depth() == 1
    assert queue.depth() == 0 and store.committed("SELECT count(*) FROM _sync_queue") == [(0,)]


# -- the shared rule -------------------------------------------------------------------------


def test_items_keep_the_order_of_ids_and_leave_out_ids_without_rows() -> None:
    rows = [(7, 2), (3, 1), (5, 2)]
    assert items_of("update", "deals", [2, 9, 1], rows) == [
        QueueItem("update", "deals", 2, (5, 7)),
        QueueItem("update", "deals", 1, (3,)),
    ]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_table_has_sqlites_columns_types_and_indexes(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    ensure_queue(conn, SCHEMA)
    ensure_queue(conn, SCHEMA)  # idempotent
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        mirror.queue.open()
        lite = [
            (r[1], AFFINITY[r[2]]) for r in mirror.conn.execute("PRAGMA table_info(_sync_queue)")
        ]
        lite_indexes = {
            r[0]
            for r in mirror.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '_sync_queue'"
                " AND sql IS NOT NULL"
            )
        }
    finally:
        mirror.close()
    pg = conn.execute(
        "SELECT column_name, data_type, collation_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = '_sync_queue' ORDER BY ordinal_position",
        (SCHEMA,),
    ).fetchall()
    assert [(name, kind) for name, kind, _ in pg] == lite
    assert {name for name, _, coll in pg if coll == "C"} == {"kind", "type_name", "received_at"}
    indexes = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = '_sync_queue'",
        (SCHEMA,),
    ).fetchall()
    assert {r[0] for r in indexes} - {"_sync_queue_pkey"} == lite_indexes


def test_processes_making_the_daemons_tables_at_once_all_succeed(pg_db: str) -> None:
    """The queue's, the proof's, the press releases' and the hours' tables made at once with the
    bookkeeping's, in one new schema: each waits its turn (the bookkeeping's lock)."""
    makers = [ensure_bookkeeping, ensure_queue, ensure_proof, ensure_press, ensure_hours] * 2
    barrier = threading.Barrier(len(makers))
    failures: list[BaseException] = []

    def make(maker: Callable[[psycopg.Connection[Any], str], None]) -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                barrier.wait()
                maker(c, "raced")
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=make, args=(m,)) for m in makers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_big_delivery_keeps_its_order_and_names_each_id_once(
    conn: psycopg.Connection[Any],
) -> None:
    queue = ChangeQueue(conn, SCHEMA)
    ids = [(i * 7919) % 5000 for i in range(10_000)]  # every id twice, in a scrambled order
    assert queue.enqueue(_updates("deals", *ids)) == 10_000
    assert queue.depth() == 5000
    first = list(dict.fromkeys(ids))
    taken = [i.resource_id for i in queue.claim("update", "deals", limit=5000)]
    assert taken == first  # oldest first: the order the delivery named them


def test_two_takers_at_once_never_take_one_row(pg_db: str) -> None:
    """`FOR UPDATE SKIP LOCKED`: three workers draining one type at once (two by lanes, one by
    claims) each take a row at most once between them, and none is lost."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        ChangeQueue(c, SCHEMA).enqueue(_updates("deals", *range(1, 2001)))
    barrier = threading.Barrier(3)
    taken: list[list[int]] = [[], [], []]
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                queue = ChangeQueue(c, SCHEMA)  # opened before any row is taken
                barrier.wait()
                while items := (
                    queue.take("deals", limit=7) if n else queue.claim("update", "deals", 9)
                ):
                    taken[n].extend(i.resource_id for i in items)
                    queue.ack(items)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    every = [i for part in taken for i in part]
    assert sorted(every) == list(range(1, 2001))  # each id taken once, none lost
    assert all(taken)  # each worker had a share
    with psycopg.connect(pg_db, autocommit=True) as c:
        assert pg_queue.waiting(c, SCHEMA) == 0


def test_a_take_passes_rows_another_transaction_holds_without_waiting(pg_db: str) -> None:
    with (
        psycopg.connect(pg_db, autocommit=True) as c,
        psycopg.connect(pg_db, autocommit=True) as other,
    ):
        queue = ChangeQueue(c, SCHEMA)
        queue.enqueue(_updates("deals", 1, 2, 3))
        c.execute("SET lock_timeout = '2s'")
        with other.transaction():
            _run(other, "SELECT id FROM _sync_queue WHERE resource_id = 3 FOR UPDATE", ())
            started = time.monotonic()
            assert [i.resource_id for i in queue.take("deals")] == [2, 1]
            assert [i.resource_id for i in queue.claim("update", "deals")] == []
            assert time.monotonic() - started < 1
        assert [i.resource_id for i in queue.take("deals")] == [3]


def test_a_notice_arriving_while_its_id_is_being_taken_is_kept_as_its_own_row(
    pg_db: str,
) -> None:
    """A receiver's enqueue meets the row a take is marking (its transaction still open): it
    waits for it, sees the row taken, and adds a row of its own, so the take's ack cannot
    remove the newer notice."""
    with (
        psycopg.connect(pg_db, autocommit=True) as worker,
        psycopg.connect(pg_db, autocommit=True) as receiver,
    ):
        queue = ChangeQueue(worker, SCHEMA)
        incoming = ChangeQueue(receiver, SCHEMA)  # opened before anything is taken
        queue.enqueue(_updates("deals", 1))
        done = threading.Event()

        def enqueue() -> None:
            incoming.enqueue(_updates("deals", 1))
            done.set()

        thread = threading.Thread(target=enqueue)
        with worker.transaction():
            (item,) = queue.take("deals")  # marked, not yet committed
            thread.start()
            assert not done.wait(0.5)  # waiting on the row the take holds
        thread.join()
        assert done.is_set()
        assert incoming.depth() == 2
        queue.ack([item])
        assert pg_queue.waiting(receiver, SCHEMA) == 1
        assert [i.resource_id for i in queue.take("deals")] == [1]


def test_two_receivers_at_once_lose_nothing_and_deadlock_on_nothing(pg_db: str) -> None:
    """Receivers enqueueing overlapping ids at once (in opposite orders): each commits, every
    id waits, and an id two of them added rows for is still one item."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        ChangeQueue(c, SCHEMA).enqueue(_updates("deals", *range(1, 301)))  # rows to move
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def receive(n: int) -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                queue = ChangeQueue(c, SCHEMA)
                ids = list(range(1, 601)) if n % 2 else list(range(600, 0, -1))
                barrier.wait()
                for _ in range(5):
                    queue.enqueue(_updates("deals", *ids), queue.open_delivery())
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=receive, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    with psycopg.connect(pg_db, autocommit=True) as c:
        queue = ChangeQueue(c, SCHEMA)
        items = queue.claim("update", "deals", limit=1000)
        assert sorted(i.resource_id for i in items) == list(range(1, 601))
        queue.ack(items)
        assert queue.depth() == 0


#: A worker in another process: takes the deals' notices, says so, and waits to be killed.
_DOOMED = """
import sys, time, psycopg
from sync.store.pg.queue import ChangeQueue
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    items = ChangeQueue(conn, sys.argv[2]).take("deals")
    print(len(items), flush=True)
    time.sleep(60)
"""


def test_a_claim_whose_process_died_comes_back_when_the_next_daemon_opens_the_queue(
    pg_db: str, conn: psycopg.Connection[Any]
) -> None:
    """`kill -9` of the worker mid-fetch: its rows stay taken (committed), and the daemon that
    takes over (the standby, once the lock is its own) opens the queue and has them again."""
    ChangeQueue(conn, SCHEMA).enqueue(_updates("deals", 1, 2, 3))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    worker = subprocess.Popen(
        [sys.executable, "-c", _DOOMED, pg_db, SCHEMA], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "3"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert pg_queue.waiting(conn, SCHEMA) == 3
    assert _run(conn, "SELECT count(*) FROM _sync_queue WHERE taken != 0", ()) == [(3,)]
    standby = QueueTable(conn, SCHEMA).open()
    assert sorted(i.resource_id for i in standby.take("deals")) == [1, 2, 3]


def test_reads_of_a_missing_table_leave_the_callers_transaction_usable(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.transaction():
        assert pg_queue.waiting(conn, SCHEMA) == 0 and pg_queue.lanes(conn, SCHEMA) == []
        assert not exists(conn, SCHEMA, "_sync_queue")  # reading made nothing
        queue = QueueTable(conn, SCHEMA).open()
        queue.enqueue(_updates("deals", 1))
    assert QueueTable(conn, SCHEMA).waiting() == 1


def test_nul_in_text_is_kept_as_a_replacement_character(conn: psycopg.Connection[Any]) -> None:
    queue = ChangeQueue(conn, SCHEMA)
    queue.enqueue(_updates("de\x00als", 1))
    assert queue.types_pending("update") == ["de\ufffdals"]
    (item,) = queue.take("de\x00als")
    queue.fail([item], "bad\x00byte")
    assert _run(conn, "SELECT type_name, last_error FROM _sync_queue", ()) == [
        ("de\ufffdals", "bad\ufffdbyte")
    ]
