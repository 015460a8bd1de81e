"""sync.readers.changes: the feed read in batches, filtered, followed, told of pruning."""

from __future__ import annotations

import itertools

import pytest

from sync.readers import changes as reader
from sync.store import Mirror
from sync.store.changes import PRUNED_KEY, Change

AT = "2026-01-01T00:00:00.000Z"


def _add(mirror: Mirror, *entries: tuple[str, int]) -> None:
    mirror.conn.executemany(
        "INSERT INTO _sync_changes (type, id, op, updated_at, at) VALUES (?, ?, 'upsert', NULL, ?)",
        [(t, rid, AT) for t, rid in entries],
    )


def test_a_reader_catches_up_batch_by_batch_and_a_filter_skips_other_types(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "BATCH", 2)
    _add(mirror, ("deals", 1), ("stores", 2), ("deals", 3), ("deals", 4), ("deals", 5))
    assert [c.seq for c in reader.changes(mirror, 0)] == [1, 2, 3, 4, 5]
    assert [(c.type, c.id) for c in reader.changes(mirror, 3, ["stores"])] == []
    assert [c.id for c in reader.changes(mirror, 1, ["deals"])] == [3, 4, 5]
    assert list(reader.changes(mirror, 5)) == []


def test_a_follower_sleeps_between_looks_and_is_told_what_was_pruned_meanwhile(
    mirror: Mirror,
) -> None:
    _add(mirror, ("deals", 1))
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:
            _add(mirror, ("tags", 2), ("deals", 3))  # seq 2, 3
        else:
            _add(mirror, ("deals", 4), ("deals", 5))  # seq 4, 5; retention drops 1-4
            mirror.conn.execute("DELETE FROM _sync_changes WHERE seq <= 4")
            mirror.conn.execute(
                "INSERT INTO _sync_meta (key, value) VALUES (?, '4')", (PRUNED_KEY,)
            )

    feed = reader.changes(mirror, 0, ["deals"], follow=True, interval=2.5, sleep=sleep)
    got = list(itertools.islice(feed, 4))
    assert [(c.seq, c.op) for c in got] == [
        (1, "upsert"),
        (3, "upsert"),
        (4, "pruned"),
        (5, "upsert"),
    ]
    assert got[2] == Change(4, "*", None, "pruned", None, None)
    assert slept == [2.5, 2.5]
