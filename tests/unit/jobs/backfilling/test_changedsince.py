"""`sync.jobs.backfilling.changedsince`: which rows served since the start are evidence of a change the
walk may not have read, and the page limit past which a long result is evidence itself."""

from __future__ import annotations

from sync.jobs.backfilling.changedsince import PAGES, changed_since
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, res, stamp, table

CONTACTS = catalogue.TYPES["contacts"]
DEALS = catalogue.TYPES["deals"]
START = stamp(0)


async def test_a_row_held_as_served_is_no_evidence_and_a_new_or_other_copy_is(
    mirror: Mirror,
) -> None:
    table(mirror, "contacts", [(1, stamp(5)), (2, stamp(6))])
    client = FakeClient()
    client.serve(Scope(CONTACTS), [res(1, "contacts", stamp(5)), res(2, "contacts", stamp(6))])
    assert await changed_since(client, mirror, CONTACTS, START) is False
    client.serve(Scope(CONTACTS), [res(1, "contacts", stamp(5)), res(2, "contacts", stamp(9))])
    assert await changed_since(client, mirror, CONTACTS, START) is True
    client.serve(Scope(CONTACTS), [res(1, "contacts", stamp(5)), res(3, "contacts", stamp(6))])
    assert await changed_since(client, mirror, CONTACTS, START) is True


async def test_rows_stamped_before_the_start_are_not_asked_for(mirror: Mirror) -> None:
    table(mirror, "contacts", [])
    client = FakeClient()
    client.serve(Scope(CONTACTS), [res(1, "contacts", "2025-12-31T23:59:59.000Z")])
    assert await changed_since(client, mirror, CONTACTS, START) is False


async def test_a_type_of_several_scopes_counts_a_row_changed_since_created(
    mirror: Mirror,
) -> None:
    """Deals move between visibility listings: a row held as served still counts unless it
    never changed since it was created."""
    table(mirror, "deals", [(1, stamp(5))])
    public, unlisted, private = scopes_of(DEALS, [])
    client = FakeClient()
    client.serve(unlisted, [res(1, "deals", stamp(5), created=stamp(5))])
    assert await changed_since(client, mirror, DEALS, START) is False
    assert [a for kind, a in client.asked if kind == "list"] == [
        ("deals", public.key, 1),
        ("deals", unlisted.key, 1),
        ("deals", private.key, 1),
    ]
    client.serve(unlisted, [res(1, "deals", stamp(5), created=stamp(1))])
    assert await changed_since(client, mirror, DEALS, START) is True


async def test_more_than_the_page_limit_is_evidence_without_reading_on(mirror: Mirror) -> None:
    rows = [(i, stamp(i)) for i in range(1, 6)]
    table(mirror, "contacts", rows)
    served = [res(i, "contacts", s) for i, s in rows]
    client = FakeClient(size=1)
    client.serve(Scope(CONTACTS), served[: PAGES - 1])
    assert await changed_since(client, mirror, CONTACTS, START) is False
    assert len(client.asked) == PAGES  # the last asked page was empty
    client.asked.clear()
    client.serve(Scope(CONTACTS), served)
    assert await changed_since(client, mirror, CONTACTS, START) is True
    assert len(client.asked) == PAGES


async def test_mall_types_types_without_stamps_and_unreadable_ids(mirror: Mirror) -> None:
    client = FakeClient()
    stores, tags = catalogue.TYPES["stores"], catalogue.TYPES["tags"]
    assert await changed_since(client, mirror, stores, START) is False
    assert await changed_since(client, mirror, tags, START) is False
    assert client.asked == []
    table(mirror, "contacts", [(1, stamp(5))])
    client.served[("contacts", "")] = [res(1, "contacts", stamp(5)) | {"id": "x1"}]
    assert await changed_since(client, mirror, CONTACTS, START) is True
