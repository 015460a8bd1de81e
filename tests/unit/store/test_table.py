"""`sync.store.table`: one type's table handle (`Mirror.table`), on a real SQLite file."""

from __future__ import annotations

from typing import Any

import pytest

from sync.model import catalogue
from sync.model.stamps import now_iso
from sync.store import Mirror
from tests.support.pages import DEALS, STORES, res, write_page

T1 = "2026-01-01T00:00:00.000Z"
T2 = "2026-01-02T00:00:00.000Z"


def test_a_table_not_yet_made_reads_as_empty(mirror: Mirror) -> None:
    deals = mirror.table("deals")
    assert not deals.exists
    assert deals.count() == 0 and list(deals.ids()) == [] and deals.get(1) is None
    assert deals.stamps([1]) == {} and deals.tombstones([1]) == {}


def test_count_ids_stamps_and_get(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(3, T2), res(1), res(2)])
    deals = mirror.table("deals")
    assert deals.exists and deals.count() == 3
    assert list(deals.ids()) == [1, 2, 3] and list(deals.ids(after=1)) == [2, 3]
    assert deals.stamps([1, 3, 9]) == {1: T1, 3: T2}
    assert deals.get(2)["title"] == "t2"  # type: ignore[index]


def test_ids_stream_past_one_chunk(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(i) for i in range(1, 1203)])
    assert list(mirror.table("deals").ids(after=1000)) == list(range(1001, 1203))


def test_delete_removes_rows_with_their_links_and_leaves_no_tombstone(mirror: Mirror) -> None:
    linked = res(1)
    linked["relationships"] = {"images": {"data": [{"type": "images", "id": "5"}]}}
    write_page(mirror, DEALS, [linked, res(2)])
    deals = mirror.table("deals")
    assert deals.delete([1, 1, 9]) == 1
    assert list(deals.ids()) == [2] and deals.tombstones([1]) == {}
    assert mirror.conn.execute("SELECT count(*) FROM deals_images").fetchone()[0] == 0
    write_page(mirror, DEALS, [res(1)])  # an inference: listed again, written again
    assert deals.get(1) is not None


def test_apply_feed_tombstones_and_keeps_a_newer_row(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1, T1), res(2, T2), res(3, T2)])
    done = mirror.table("deals").apply_feed({1: T2, 2: T1, 3: T2})
    assert done.removed == 1 and done.kept == [2] and done.tied == [3]
    assert set(mirror.table("deals").tombstones([1, 2, 3])) == {1, 2}
    write_page(mirror, DEALS, [res(1, T1)])  # an older copy: the tombstone refuses it
    assert mirror.table("deals").get(1) is None
    assert (
        mirror.table("deals").get(3) is not None
    )  # a tie: filter[id] decides (sync.jobs.incremental.poll)


def test_listing_of_one_mall_diffs_against_its_memberships(mirror: Mirror) -> None:
    write_page(mirror, STORES, [res(1, type_="stores"), res(2, type_="stores")], mall_id=4)
    stores = mirror.table(STORES)
    assert stores.count(mall_id=4) == 2 and stores.malls_of(1) == [4]
    with stores.listing(4) as listing:
        listing.add([(1, T1)])
        assert [i for batch in listing.absent() for i in batch] == [2]
    assert stores.remove_memberships(4, [2]) == 1
    assert list(stores.ids(mall_id=4)) == [1]
    assert list(stores.orphans()) == [[2]]


def test_two_listings_get_two_temporary_tables(mirror: Mirror) -> None:
    a, b = mirror.table("deals").listing(), mirror.table("deals").listing()
    assert a.name != b.name


def test_links_of_one_owner(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1)])
    deals = mirror.table(DEALS)
    images = next(r for r in DEALS.relationships if r.name == "images")
    deals.replace_links(images, 1, [7, 6])
    rows = mirror.conn.execute("SELECT images_id FROM deals_images ORDER BY position").fetchall()
    assert [r[0] for r in rows] == [7, 6]


def test_to_one_columns_of_one_owner(mirror: Mirror) -> None:
    jobs = catalogue.TYPES["job_listings"]
    write_page(mirror, jobs, [res(1, type_="job_listings")])
    table = mirror.table(jobs)
    table.set_to_one("store_id", 1, 42)
    assert table.get(1)["store_id"] == 42  # type: ignore[index]
    assert table.write_to_one("store_id", [(1, 43)], {1: T1}) == 1
    assert table.get(1)["store_id"] == 43  # type: ignore[index]
    assert table.write_to_one("store_id", [(1, 44)], {1: T2}) == 0  # another stamp: left
    assert table.get(1)["store_id"] == 43  # type: ignore[index]


def test_replace_mall_links_of_a_routed_table(mirror: Mirror) -> None:
    write_page(mirror, catalogue.TYPES["malls"], [res(3, type_="malls")])
    write_page(mirror, catalogue.TYPES["contacts"], [res(1, type_="contacts")])
    assert mirror.table("contacts").replace_mall_links(3, [1, 2]) == 2
    held = mirror.conn.execute("SELECT malls_id, contacts_id FROM malls_contacts").fetchall()
    assert sorted(held) == [(3, 1), (3, 2)]


def _linking(rid: int, type_: str, rel: str, targets: list[int]) -> dict[str, Any]:
    """Resource `rid` of `type_` with the linkage of `rel` as served: `targets`, in order."""
    linked = res(rid, type_=type_)
    data = [{"type": rel, "id": str(t)} for t in targets]
    linked["relationships"] = {rel: {"data": data}}
    return linked


def _held(mirror: Mirror, table: str, owner: str, related: str) -> list[tuple[int, ...]]:
    query = f"SELECT {owner}, {related}, position FROM {table} ORDER BY {owner}, position"
    return [tuple(r) for r in mirror.conn.execute(query).fetchall()]


def test_links_a_route_wrote_before_the_owner_s_first_page_become_the_page_s(
    mirror: Mirror,
) -> None:
    """A relationship's own route writes an owner's links (`replace_links`) before any page
    has brought the owner, into a table this mirror made (a first backfill's, whose ids the
    page write tracks: `sync.store.fresh`). The owner's page then holds exactly its own
    links: none left over, none refused (PostgreSQL: no duplicate key failing the page)."""
    write_page(mirror, DEALS, [res(1)])  # made here, empty: an id never written is new
    images = next(r for r in DEALS.relationships if r.name == "images")
    mirror.table(DEALS).replace_links(images, 2, [6, 7])
    write_page(mirror, DEALS, [_linking(2, "deals", "images", [7, 8])])
    assert _held(mirror, "deals_images", "deals_id", "images_id") == [(2, 7, 0), (2, 8, 1)]


def test_a_mall_s_contacts_from_its_route_before_its_first_page_become_the_page_s(
    mirror: Mirror,
) -> None:
    """`malls_contacts` is the malls' `contacts` linkage and what the mall routes fill
    (`replace_mall_links`, `settle_mall_links`): written for a mall no page has brought yet,
    they become what the mall's page says."""
    malls = catalogue.TYPES["malls"]
    write_page(mirror, malls, [res(1, type_="malls")])  # made here: its ids are tracked
    write_page(mirror, catalogue.TYPES["contacts"], [res(i, type_="contacts") for i in (10, 12)])
    contacts = mirror.table("contacts")
    contacts.replace_mall_links(3, [10, 11])
    assert contacts.settle_mall_links(4, [12, 14], [12, 14]) == 2
    write_page(
        mirror,
        malls,
        [_linking(3, "malls", "contacts", [11, 12]), _linking(4, "malls", "contacts", [12, 13])],
    )
    assert _held(mirror, "malls_contacts", "malls_id", "contacts_id") == [
        (3, 11, 0),
        (3, 12, 1),
        (4, 12, 0),
        (4, 13, 1),
    ]


def test_an_operation_that_needs_a_resource_type_names_the_table_that_is_none(
    mirror: Mirror,
) -> None:
    with pytest.raises(KeyError, match="no resource type"):
        mirror.table("malls_stores").set_to_one("x", 1, 2)
    assert mirror.table("malls_stores").count() == 0  # reads work on any table


def test_a_deletion_now_is_a_tombstone_now(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1)])
    mirror.table("deals").apply_feed({1: now_iso()})
    assert mirror.table("deals").count() == 0


def test_ids_grouped_by_each_mall_that_lists_them(mirror: Mirror) -> None:
    write_page(mirror, STORES, [res(1, type_="stores"), res(2, type_="stores")], mall_id=4)
    write_page(mirror, STORES, [res(1, type_="stores")], mall_id=3)
    assert mirror.table(STORES).by_mall([2, 1, 9]) == {3: [1], 4: [2, 1]}  # 9: in no mall
