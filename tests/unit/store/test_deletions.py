"""`sync.store.deletions`: feed entries delete and tombstone by their moment, inferences leave nothing."""

from __future__ import annotations

from typing import Any

import pytest

from sync.model.stamps import now_iso, shift
from sync.store import Mirror
from sync.store.deletions import (
    STAMPLESS_TOMBSTONE_SECONDS,
    Deletions,
    Judge,
    SqliteTombstones,
    stampless_horizon,
    tombstone_verdict,
)
from tests.support.store_units import rows, staged, write

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _res(
    rid: int, type_: str, updated: str | None = T0, **rels: list[tuple[str, int]]
) -> dict[str, Any]:
    attrs: dict[str, Any] = {"name": f"n{rid}", "title": f"t{rid}"}
    if updated is not None:
        attrs["updated_at"] = updated
    out: dict[str, Any] = {"id": str(rid), "type": type_, "attributes": attrs}
    if rels:
        out["relationships"] = {
            name: {"data": [{"type": t, "id": str(i)} for t, i in targets]}
            for name, targets in rels.items()
        }
    return out


@pytest.mark.parametrize(
    ("deleted_at", "stamp", "now", "verdict"),
    [
        (None, T2, T2, "refused"),  # a tombstone from before versions
        (T1, T0, T2, "refused"),  # a day before: a copy made before the deletion
        (T1, T1, T2, "tied"),  # stamped at the deletion: filter[id] decides
        (T1, shift(T1, -1), T2, "tied"),  # a second before (another clock): within the window
        (T1, shift(T1, 1), T2, "tied"),
        (T1, shift(T1, 2), T2, "lifted"),  # past the window: created again
        (T1, T2, T2, "lifted"),
        (T1, None, shift(T1, STAMPLESS_TOMBSTONE_SECONDS - 1), "refused"),
        (T1, None, shift(T1, STAMPLESS_TOMBSTONE_SECONDS), "lifted"),
    ],
)
def test_which_copies_a_tombstone_refuses(
    deleted_at: str | None, stamp: str | None, now: str, verdict: str
) -> None:
    """The one rule (`tombstone_verdict`): refused, tied (held for `filter[id]`) or lifted;
    a tombstone keeps out every copy it does not lift."""
    assert tombstone_verdict(deleted_at, stamp, Judge(stampless_horizon(now))) == verdict


def test_an_entry_without_a_moment_spares_stamped_rows_and_takes_stampless_ones(
    mirror: Mirror,
) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("deals", [_res(1, "deals"), _res(2, "deals")]))
    write(conn, schema, staged("tags", [_res(7, "tags", None)]))
    gone = Deletions(SqliteTombstones(conn, schema))
    deals = gone.apply_feed("deals", {1: None, 2: T1})
    assert (deals.removed, deals.kept, deals.unstamped) == (1, [], 1)
    tags = gone.apply_feed("tags", {7: None})
    assert (tags.removed, tags.kept, tags.unstamped) == (1, [], 1)
    assert rows(conn, "SELECT id FROM deals") == [(1,)]
    assert rows(conn, "SELECT type, id, source FROM _sync_tombstones ORDER BY type") == [
        ("deals", 2, "feed"),
        ("tags", 7, "feed"),
    ]


def test_a_tombstone_keeps_the_latest_moment_whatever_order_entries_come_in(
    mirror: Mirror,
) -> None:
    conn, schema = mirror.conn, mirror.schema
    gone = Deletions(SqliteTombstones(conn, schema))
    write(conn, schema, staged("deals", [_res(1, "deals")]))
    gone.apply_feed("deals", {1: T2})
    gone.apply_feed("deals", {1: T1})  # an older entry read again by the feed's overlap
    assert gone.held("deals", [1, 2]) == {1: T2}
    again = staged("deals", [_res(1, "deals", T1)])  # fetched before the deletion
    write(conn, schema, again)
    assert again[0].dropped == 1 and rows(conn, "SELECT id FROM deals") == []


def test_a_row_newer_than_its_entry_stays_and_a_later_copy_lifts_the_tombstone(
    mirror: Mirror,
) -> None:
    conn, schema = mirror.conn, mirror.schema
    page = [_res(1, "deals", T2), _res(2, "deals", T0), _res(3, "deals", T1)]
    write(conn, schema, staged("deals", page))
    applied = Deletions(SqliteTombstones(conn, schema)).apply_feed("deals", {1: T1, 2: T1, 3: T1})
    # 3, stamped at the entry's very moment, is no evidence either way: left, untombstoned,
    # for filter[id] to decide (`FeedApplied.tied`)
    assert (applied.removed, applied.kept, applied.tied) == (1, [1], [3])
    assert rows(conn, "SELECT id, updated_at FROM deals ORDER BY id") == [(1, T2), (3, T1)]
    write(conn, schema, staged("deals", [_res(2, "deals", T2)]))
    assert rows(conn, "SELECT id FROM deals ORDER BY id") == [(1,), (2,), (3,)]
    assert rows(conn, "SELECT id FROM _sync_tombstones WHERE type = 'deals'") == [(1,)]


def test_an_inferred_deletion_takes_the_links_both_ways_and_notes_their_owners(
    mirror: Mirror,
) -> None:
    conn, schema = mirror.conn, mirror.schema
    deal = _res(1, "deals", images=[("images", 5), ("images", 6)])
    write(conn, schema, staged("deals", [deal], [_res(5, "images"), _res(6, "images")]))
    write(conn, schema, staged("stores", [_res(3, "stores", images=[("images", 5)])], mall_id=9))
    gone = Deletions(SqliteTombstones(conn, schema))
    mark = conn.execute("SELECT max(seq) FROM _sync_changes").fetchone()[0]
    assert gone.delete("images", [5]) == 1
    assert rows(conn, "SELECT deals_id, images_id FROM deals_images") == [(1, 6)]
    assert rows(conn, "SELECT * FROM stores_images") == []
    assert rows(
        conn, "SELECT type, id, op FROM _sync_changes WHERE seq > ? ORDER BY seq", mark
    ) == [("images", 5, "delete"), ("deals", 1, "links"), ("stores", 3, "links")]
    assert gone.delete("stores", [3]) == 1
    assert rows(conn, "SELECT * FROM malls_stores") == []
    assert gone.held("stores", [3]) == {}  # an inference leaves no tombstone
    write(conn, schema, staged("stores", [_res(3, "stores", T0)], mall_id=9))
    assert rows(conn, "SELECT id, mall_id FROM stores") == [(3, 9)]


def test_a_deleted_mall_takes_its_memberships_and_hours(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    write(conn, schema, staged("malls", [_res(9, "malls")]))
    write(conn, schema, staged("stores", [_res(3, "stores")], mall_id=9))
    conn.execute(
        "INSERT INTO current_hours (mall_id, body, fetched_at) VALUES (9, '{}', ?)", (now_iso(),)
    )
    assert Deletions(SqliteTombstones(conn, schema)).delete("malls", [9]) == 1
    assert rows(conn, "SELECT * FROM malls_stores") == []
    assert rows(conn, "SELECT id, mall_id FROM stores") == [(3, None)]  # left for `orphans`
    assert rows(conn, "SELECT * FROM current_hours") == []
