"""`sync.store.listing`: an id listing in a temp table, diffed against a table or a mall's members."""

from __future__ import annotations

from sync.store import Mirror
from sync.store.listing import Listing
from tests.support.store_units import rows, staged, write

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


def _page(mirror: Mirror, type_: str, ids: range | list[int], mall: int | None = None) -> None:
    attrs = {"name": "n"} if type_ == "tags" else {"name": "n", "updated_at": T0}
    page = [{"id": str(i), "type": type_, "attributes": attrs} for i in ids]
    write(mirror.conn, mirror.schema, staged(type_, page, mall_id=mall))


def test_stamps_compare_normalised_and_batches_cover_every_id(mirror: Mirror) -> None:
    _page(mirror, "deals", range(1, 251))
    with Listing(mirror.conn, "deals", None, "_unit_listing") as listing:
        listing.add((i, "2026-01-01T00:00:00Z") for i in range(1, 301))  # the same moment
        listing.add([(5, "2026-01-02T01:00:00+01:00"), (6, "not a time")])
        batches = list(listing.missing_or_stale())
        assert [len(b) for b in batches] == [51]
        assert batches[0] == [5, *range(251, 301)]
        assert listing.counts() == (300, 250)
        assert list(listing.absent()) == []
    assert (
        rows(mirror.conn, "SELECT name FROM sqlite_temp_master WHERE name = '_unit_listing'") == []
    )


def test_an_equal_stamp_at_or_after_the_settling_horizon_is_listed_again(mirror: Mirror) -> None:
    """`unsettled_since`: rows held under the very stamp listed, that stamp not before it, are
    asked again (a second version may share the stamp); older equal stamps, newer held stamps
    and a table without stamps are not."""
    _page(mirror, "deals", [1, 2])  # held at T0
    with Listing(mirror.conn, "deals", None, "_unit_settle") as listing:
        listing.add([(1, T0), (2, T1), (3, T0)])
        assert list(listing.missing_or_stale()) == [[2, 3]]
        assert list(listing.missing_or_stale(T0)) == [[1, 2, 3]]
        assert list(listing.missing_or_stale(T1)) == [[2, 3]]
    _page(mirror, "tags", [1])
    with Listing(mirror.conn, "tags", None, "_unit_settle_tags") as listing:
        listing.add([(1, None)])
        assert list(listing.missing_or_stale(T0)) == []


def test_a_table_without_stamps_is_diffed_by_ids_alone(mirror: Mirror) -> None:
    _page(mirror, "tags", [1, 2, 3])
    with Listing(mirror.conn, "tags", None, "_unit_tags") as listing:
        listing.add([(2, T1), (4, T1)])
        assert list(listing.missing_or_stale()) == [[4]]
        assert list(listing.absent()) == [[1, 3]]


def test_a_mall_s_listing_claims_its_rows_and_lowers_their_mall_id(mirror: Mirror) -> None:
    _page(mirror, "stores", [1, 2], mall=8)
    _page(mirror, "stores", [3], mall=9)
    with Listing(mirror.conn, "stores", 5, "_unit_mall") as listing:
        listing.add([(1, T0), (3, T0), (4, T0)])
        assert listing.counts() == (3, 0)  # nothing in mall 5 yet
        assert listing.claim_mall() == 2
        assert listing.claim_mall() == 0
        assert listing.counts() == (3, 2)
        assert list(listing.missing_or_stale()) == [[4]]
    assert rows(mirror.conn, "SELECT id, mall_id FROM stores ORDER BY id") == [
        (1, 5),
        (2, 8),
        (3, 5),
    ]
    assert rows(mirror.conn, "SELECT malls_id, stores_id FROM malls_stores ORDER BY 2, 1") == [
        (5, 1),
        (8, 1),
        (8, 2),
        (5, 3),
        (9, 3),
    ]
