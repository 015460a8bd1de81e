"""`sync.jobs.incremental.feed`: entries delete rows not newer than themselves, keep newer ones, map the
types' spellings, and count unknown types once per entry."""

from __future__ import annotations

import orjson
import pytest

from sync.jobs.incremental import feed
from sync.jobs.incremental.feed import META_KEY, FeedEntries, unknown_types
from sync.store import Mirror
from tests.support.jobfakes import deletion, ids, page, stamp, table


def test_an_entry_deletes_a_row_not_newer_and_keeps_one_created_again(mirror: Mirror) -> None:
    table(mirror, "job_listings", [(1, stamp(5)), (2, stamp(20)), (3, stamp(10)), (4, stamp(1))])
    entries = FeedEntries(mirror, {"job_listings"})
    entries.apply(
        page(
            [
                deletion(1, "JobListing", 1, stamp(10)),  # a framework's spelling
                deletion(2, "job listings", 2, stamp(10)),  # the row is newer: created again
                deletion(3, "job_listings", 3, stamp(10)),  # equal: for filter[id] to decide
                deletion(4, "job_listings", "abc", stamp(10)),  # no id to apply
            ]
        )
    )
    assert ids(mirror, "job_listings") == [2, 3, 4]
    assert entries.tied == {"job_listings": [3]}
    tombs = mirror.conn.execute(
        "SELECT id, deleted_at FROM _sync_tombstones WHERE type = 'job_listings' ORDER BY id"
    ).fetchall()
    assert [tuple(t) for t in tombs] == [(1, stamp(10)), (2, stamp(10))]


def test_types_not_mirrored_are_left_and_sideloads_apply_where_held(mirror: Mirror) -> None:
    table(mirror, "events", [(1, stamp(1))])
    table(mirror, "images", [(7, stamp(1))])
    entries = FeedEntries(mirror, {"deals"})
    assert entries.applies("deals") and entries.applies("images")
    assert not entries.applies("events") and not entries.applies("tags")  # no tags table
    entries.apply(page([deletion(1, "events", 1, stamp(9)), deletion(2, "images", 7, stamp(9))]))
    assert ids(mirror, "events") == [1]
    assert ids(mirror, "images") == []


def test_unknown_types_are_counted_once_per_entry_and_kept(mirror: Mirror) -> None:
    told: list[tuple[str, int]] = []
    entries = FeedEntries(mirror, {"deals"}, on_unknown=lambda name, n: told.append((name, n)))
    first = page(
        [
            deletion(1, "Coupon", 1, stamp(1)),
            deletion(2, "Coupon", 2, stamp(1)),
            deletion(3, "  ", 3, stamp(1)),
        ]
    )
    entries.apply(first)
    entries.apply(first)  # the feed's overlap reads them again: not counted twice
    entries.apply(page([deletion(4, "Coupon", 4, stamp(2))]))
    assert told == [("Coupon", 2), ("(empty)", 1), ("Coupon", 1)]
    assert unknown_types(mirror) == {"Coupon": 3, "(empty)": 1}


def test_past_the_names_kept_unknown_types_count_as_other(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed, "NAMES_KEPT", 2)
    entries = FeedEntries(mirror, set())
    entries.apply(page([deletion(i, f"Kind{i}", i, stamp(1)) for i in range(1, 5)]))
    assert unknown_types(mirror) == {"Kind1": 1, "Kind2": 1, "(other)": 2}


def test_a_damaged_count_reads_as_none(mirror: Mirror) -> None:
    mirror.conn.execute("INSERT INTO _sync_meta (key, value) VALUES (?, ?)", (META_KEY, "{oops"))
    mirror.conn.commit()
    assert unknown_types(mirror) == {}
    mirror.conn.execute(
        "UPDATE _sync_meta SET value = ? WHERE key = ?", (orjson.dumps([1]).decode(), META_KEY)
    )
    mirror.conn.commit()
    assert unknown_types(mirror) == {}
