"""`sync.jobs.malls.sideloads`: what a reconcile listing asks for besides ids and stamps, and that a
page without linkage to compare writes nothing."""

from __future__ import annotations

from sync.jobs.malls.sideloads import SIDELOADED, apply_page, params, relationships
from sync.model import catalogue
from sync.store import Mirror
from tests.support.jobfakes import stamp, table


def test_the_types_only_ever_sideloaded() -> None:
    assert SIDELOADED == ("images", "tags", "groups")


def test_a_listing_asks_stamps_and_linkage_with_listed_targets_trimmed() -> None:
    events = catalogue.TYPES["events"]
    assert [r.name for r in relationships(events)] == ["images", "groups", "tags"]  # not `mall`
    fields, extra = params(events)
    assert fields == ["updated_at", "images", "groups", "tags", "mall"]
    assert extra == {
        "include": "images,images.tags,groups,tags,tags.tags,mall",
        "fields[malls]": "updated_at",  # a listed type: trimmed; sideloads come whole
    }
    deals_fields, deals_extra = params(catalogue.TYPES["deals"])
    assert deals_fields == ["updated_at", "images", "tags", "stores"]
    assert deals_extra["fields[stores]"] == "updated_at"
    assert "fields[images]" not in deals_extra and "fields[tags]" not in deals_extra


def test_a_type_without_relationships_asks_only_its_stamp() -> None:
    assert params(catalogue.TYPES["contacts"]) == (["updated_at"], {})
    assert params(catalogue.TYPES["groups"]) == ([], {})


def test_nothing_to_compare_is_no_write(mirror: Mirror) -> None:
    row = {"id": "1", "type": "contacts", "attributes": {"updated_at": "2026-01-01T00:00:00Z"}}
    assert apply_page(mirror, catalogue.TYPES["contacts"], [row], []) == 0
    assert apply_page(mirror, catalogue.TYPES["deals"], [], []) == 0
    tables = {r[0] for r in mirror.conn.execute("SELECT name FROM sqlite_master")}
    assert "contacts" not in tables and "deals" not in tables


def _deal(rid: int, updated: str, images: list[int]) -> dict[str, object]:
    linkage = [{"type": "images", "id": str(i)} for i in images]
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"updated_at": updated},
        "relationships": {"images": {"data": linkage}, "tags": {"data": []}},
    }


def test_only_owners_held_at_the_listed_stamp_have_their_links_replaced(mirror: Mirror) -> None:
    """Deal 1 is held as listed: its images are replaced (an image dropped under an unchanged
    stamp leaves); deal 2 is listed with another stamp: left to the reconcile."""
    deals = catalogue.TYPES["deals"]
    table(mirror, "deals", [(1, stamp(1)), (2, stamp(1))])
    image = {
        "id": "10",
        "type": "images",
        "attributes": {"url": "/10.jpg", "updated_at": stamp(1)},
    }
    assert (
        apply_page(mirror, deals, [_deal(1, stamp(1), [10]), _deal(2, stamp(9), [10])], [image])
        == 1
    )
    links = mirror.conn.execute("SELECT deals_id, images_id FROM deals_images").fetchall()
    assert [tuple(r) for r in links] == [(1, 10)]
    assert [tuple(r) for r in mirror.conn.execute("SELECT id, url FROM images")] == [
        (10, "/10.jpg")
    ]
    assert apply_page(mirror, deals, [_deal(1, stamp(1), [])], []) == 1
    assert mirror.conn.execute("SELECT count(*) FROM deals_images").fetchone()[0] == 0
