"""`sync.store.malls`: mall-level operations across types (`Mirror.malls`)."""

from __future__ import annotations

from sync.model import catalogue
from sync.store import Mirror
from tests.support.pages import STORES, res, write_page

MALLS = catalogue.TYPES["malls"]


def test_a_mirrored_mall_gone_takes_its_row_and_memberships_not_its_members(
    mirror: Mirror,
) -> None:
    write_page(mirror, MALLS, [res(3, type_="malls"), res(4, type_="malls")])
    write_page(mirror, STORES, [res(1, type_="stores")], mall_id=3)
    write_page(mirror, STORES, [res(2, type_="stores")], mall_id=4)
    mirror.malls.gone(3)
    assert list(mirror.table("malls").ids()) == [4]
    assert mirror.table("stores").get(1) is not None  # left for `orphans`, never deleted here
    assert list(mirror.table("stores").orphans()) == [[1]]
    assert mirror.table("malls").tombstones([3]) == {}  # an inference: no tombstone


def test_a_mall_gone_that_was_never_mirrored_drops_its_memberships(mirror: Mirror) -> None:
    write_page(mirror, STORES, [res(1, type_="stores")], mall_id=3)
    mirror.hours.write_current(3, {"open": True})
    assert mirror.malls.referenced() == {3}
    mirror.malls.gone(3)
    assert mirror.malls.referenced() == set()
    assert mirror.conn.execute("SELECT count(*) FROM current_hours").fetchone()[0] == 0


def test_referenced_is_the_malls_held_and_named(mirror: Mirror) -> None:
    write_page(mirror, MALLS, [res(5, type_="malls")])
    write_page(mirror, STORES, [res(1, type_="stores")], mall_id=7)
    assert mirror.malls.referenced() == {5, 7}


def test_deals_of_a_mall_from_the_routed_table(mirror: Mirror) -> None:
    write_page(mirror, MALLS, [res(3, type_="malls")])
    write_page(mirror, catalogue.TYPES["deals"], [res(2), res(9)])
    mirror.schema.materialize_mall_deals()
    mirror.table("deals").replace_mall_links(3, [9, 2])
    assert mirror.malls.deals(3) == [2, 9]
