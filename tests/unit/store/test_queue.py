"""`sync.store.queue`: notices committed before the answer, claimed by oldest id, kept until acked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sync.model.notices import WebhookNotice
from sync.store import Mirror
from sync.store.queue import ChangeQueue


def _notice(kind: str, type_name: str | None, rid: int) -> WebhookNotice:
    return WebhookNotice(kind, type_name, type_name or "widgets", rid)  # type: ignore[arg-type]


def test_an_enqueue_is_committed_when_it_returns_and_unknown_types_are_left_out(
    mirror: Mirror, tmp_path: Path
) -> None:
    queue = ChangeQueue(mirror.conn)
    n = queue.enqueue(
        [
            _notice("update", "deals", 1),
            _notice("update", None, 2),
            _notice("deletion", "stores", 3),
        ]
    )
    assert n == 2
    other = sqlite3.connect(f"file:{tmp_path / 'm.db'}?mode=ro", uri=True)
    try:  # another connection (a crash right after the 202) sees them already
        assert other.execute(
            "SELECT kind, type_name, resource_id, attempts FROM _sync_queue ORDER BY id"
        ).fetchall() == [("update", "deals", 1, 0), ("deletion", "stores", 3, 0)]
    finally:
        other.close()
    assert queue.enqueue([_notice("update", None, 4)]) == 0
    assert queue.depth() == 2


def test_claims_take_the_oldest_ids_of_one_kind_and_type(mirror: Mirror) -> None:
    queue = ChangeQueue(mirror.conn)
    queue.enqueue([_notice("update", "deals", i) for i in (5, 3, 5, 9, 3, 7)])
    queue.enqueue([_notice("deletion", "deals", 5), _notice("update", "events", 1)])
    assert queue.types_pending("update") == ["deals", "events"]
    assert queue.types_pending("deletion") == ["deals"]
    items = queue.claim("update", "deals", limit=2)
    # an id notified again while it waits adds no row
    assert [(i.resource_id, len(i.row_ids)) for i in items] == [(5, 1), (3, 1)]
    queue.ack(items)
    assert [i.resource_id for i in queue.claim("update", "deals")] == [9, 7]
    assert [i.resource_id for i in queue.claim("deletion", "deals")] == [5]
    assert queue.depth() == 4


def test_a_failure_keeps_the_item_counts_the_attempt_and_clips_the_error(mirror: Mirror) -> None:
    queue = ChangeQueue(mirror.conn)
    queue.enqueue([_notice("update", "deals", 1)])
    (item,) = queue.claim("update", "deals")
    queue.fail([item], "x" * 900)
    queue.fail([item], "timeout")
    assert mirror.conn.execute("SELECT attempts, last_error FROM _sync_queue").fetchall() == [
        (2, "timeout")
    ]
    queue.fail([item], "y" * 900)
    assert mirror.conn.execute("SELECT length(last_error) FROM _sync_queue").fetchone() == (500,)
    assert queue.claim("update", "deals") == [item]
    ChangeQueue(mirror.conn)  # a restart: the table and its rows stay
    assert queue.depth() == 1


def test_an_id_notified_again_while_it_waits_adds_no_row_and_moves_to_the_newer_lane(
    mirror: Mirror,
) -> None:
    """#50: a delivery sent twice costs nothing more; an id a small delivery names again is
    served in that delivery's lane, not at the end of the giant one it was in."""
    queue = ChangeQueue(mirror.conn)
    big, small = queue.open_delivery(), queue.open_delivery()
    assert queue.enqueue([_notice("update", "deals", i) for i in range(1, 301)], big) == 300
    assert queue.enqueue([_notice("update", "deals", i) for i in range(1, 301)], big) == 300
    assert queue.depth() == 300
    queue.enqueue([_notice("update", "deals", 250)], small)
    assert queue.depth() == 300
    first, second, third = (queue.take("deals", limit=100) for _ in range(3))
    big_lane = [i for i in range(300, 0, -1) if i != 250]  # newest first (#47)
    assert [i.resource_id for i in first] == big_lane[:100]
    assert [i.resource_id for i in second] == [250]  # the small lane's turn
    assert [i.resource_id for i in third] == big_lane[100:200]


def test_a_change_notified_while_its_id_is_taken_is_kept_for_another_fetch(
    mirror: Mirror,
) -> None:
    """The row being fetched is not matched by the dedupe: its `ack` must not take the newer
    notice with it. Taken rows wait again on `fail`, `release` and a reopened queue."""
    queue = ChangeQueue(mirror.conn)
    queue.enqueue([_notice("update", "deals", 1)])
    queue.enqueue([_notice("deletion", "deals", 2)])
    (taken,) = queue.take("deals")
    queue.enqueue([_notice("update", "deals", 1)])  # a newer change, mid-fetch
    assert queue.depth() == 3
    queue.ack([taken])
    assert [(i.kind, i.resource_id) for i in queue.take("deals")] == [("deletion", 2)]
    assert [(i.kind, i.resource_id) for i in queue.take("deals")] == [("update", 1)]
    assert queue.take("deals") == []  # both taken
    queue.release("deals")
    assert len(queue.take("deals")) == 1
    reopened = ChangeQueue(mirror.conn)  # a restart: nothing is in flight
    assert len(reopened.take("deals")) + len(reopened.take("deals")) == 2


def test_answered_removes_only_waiting_updates_of_those_ids_received_before_the_ask(
    mirror: Mirror,
) -> None:
    """#47: what a poll page served after the notice was received needs no fetch of its own;
    a deletion, a notice the worker has taken, another id, or one received at the ask or after
    stays, and a notice received again while it waits counts from then."""
    queue = ChangeQueue(mirror.conn)
    queue.enqueue([_notice("update", "deals", i) for i in (1, 2, 3, 4, 5)])
    queue.enqueue([_notice("deletion", "deals", 1), _notice("update", "events", 1)])
    mirror.conn.execute("UPDATE _sync_queue SET received_at = '2026-01-01T00:00:00.000Z'")
    mirror.conn.commit()
    (taken,) = queue.claim("update", "deals", limit=1)  # id 1: its fetch under way
    queue.enqueue([_notice("update", "deals", 4)])  # received again, now
    asked = "2026-01-01T00:00:01.000Z"
    assert queue.answered("deals", [1, 2, 4, 6], asked) == 1  # only 2
    assert queue.answered("deals", [3], "2026-01-01T00:00:00.000Z") == 0  # received at the ask
    left = mirror.conn.execute(
        "SELECT kind, type_name, resource_id FROM _sync_queue ORDER BY kind, type_name, resource_id"
    ).fetchall()
    assert left == [
        ("deletion", "deals", 1),
        ("update", "deals", 1),
        ("update", "deals", 3),
        ("update", "deals", 4),
        ("update", "deals", 5),
        ("update", "events", 1),
    ]
    queue.ack([taken])
