"""`sync.jobs.proving.reconcile`: a listing against the mirror fetches the missing and stale, deletes
only what `filter[id]` confirms, and the mass-delete guard refuses with a message naming why."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.core.errors import NotFoundError
from sync.jobs.proving.reconcile import MassDeleteRefused, Reconciler, group_by_mall
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, ids, res, stamp, table

CONTACTS = catalogue.TYPES["contacts"]
DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]


def test_scopes_of_one_mall_go_together() -> None:
    deals = scopes_of(DEALS, [])
    stores = [Scope(STORES, 1), Scope(STORES, 2), Scope(STORES, 1, {"x": "y"})]
    assert group_by_mall(deals) == [deals]
    assert group_by_mall(stores) == [[stores[0], stores[2]], [stores[1]]]
    assert group_by_mall([]) == []


async def test_missing_and_stale_rows_are_fetched_and_confirmed_ones_deleted(
    mirror: Mirror,
) -> None:
    table(mirror, "contacts", [(1, stamp(1)), (2, stamp(1)), (3, stamp(1)), (5, stamp(1))])
    client = FakeClient(size=2)
    client.serve(
        Scope(CONTACTS),
        [
            res(1, "contacts", stamp(1)),
            res(2, "contacts", stamp(5)),  # stale here
            res(4, "contacts", stamp(2)),  # missing here
            res(5, "contacts", stamp(1)),  # skipped by the listing, served by filter[id]
        ],
    )
    client.unlisted = {5}
    reconciler = Reconciler(client, mirror, max_delete_share=0.5)
    result = await reconciler.reconcile([Scope(CONTACTS)])
    assert (result.listed, result.local, result.fetched, result.removed) == (3, 4, 2, 1)
    assert ids(mirror, "contacts") == [1, 2, 4, 5]
    held = mirror.conn.execute("SELECT updated_at FROM contacts WHERE id = 2").fetchone()[0]
    assert held == stamp(5)
    assert [a for k, a in client.asked if k == "ids"] == [("", [2, 4]), ("", [3, 5])]


async def test_an_empty_listing_is_refused_before_any_filter_id(mirror: Mirror) -> None:
    table(mirror, "contacts", [(i, stamp(1)) for i in range(1, 13)])
    client = FakeClient()
    reconciler = Reconciler(client, mirror, max_delete_share=0.5)
    with pytest.raises(MassDeleteRefused) as refused:
        await reconciler.reconcile([Scope(CONTACTS)])
    assert str(refused.value) == (
        "contacts: refusing to delete 12 of 12 rows (the upstream listed none; more than 50% "
        "that the deletions feed does not explain); nothing was deleted"
    )
    assert len(ids(mirror, "contacts")) == 12
    assert [k for k, _ in client.asked] == ["list"]


async def test_confirmed_deletions_past_the_share_are_refused_and_none_is_applied(
    mirror: Mirror,
) -> None:
    table(mirror, "contacts", [(i, stamp(1)) for i in range(1, 31)])
    client = FakeClient()
    client.serve(Scope(CONTACTS), [res(i, "contacts", stamp(1)) for i in range(1, 15)])
    with pytest.raises(
        MassDeleteRefused, match=r"refusing to delete 16 of 30 rows \(confirmed gone"
    ):
        await Reconciler(client, mirror, max_delete_share=0.5).reconcile([Scope(CONTACTS)])
    assert len(ids(mirror, "contacts")) == 30
    # Without a guard (`--force`) they go; the floor of 10 lets a small table lose a few.
    result = await Reconciler(client, mirror).reconcile([Scope(CONTACTS)])
    assert result.removed == 16 and ids(mirror, "contacts") == list(range(1, 15))


async def test_a_top_level_listing_404_is_raised(mirror: Mirror) -> None:
    class Lost(FakeClient):
        def iter_pages(self, request: Scope | Listing, start: int = 1) -> AsyncIterator[Page]:
            raise NotFoundError("route gone", url="/contacts", status=404)

    table(mirror, "contacts", [(1, stamp(1))])
    with pytest.raises(NotFoundError):
        await Reconciler(Lost(), mirror).reconcile([Scope(CONTACTS)])
    assert ids(mirror, "contacts") == [1]
