"""`sync.jobs.evidence`: `filter[id]` in every scope of a group writes what is served, deletes
only what no scope serves, and a mall listing's 404 is decided by `GET /malls/{id}`."""

from __future__ import annotations

import pytest

from sync.core.errors import ListingMissingError, NotFoundError
from sync.jobs.evidence import Evidence, confirm_mall_gone
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, ids, res, stamp, table

DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]


async def test_every_scope_of_the_group_is_asked_and_what_it_serves_is_written(
    mirror: Mirror,
) -> None:
    public, unlisted, private = scopes_of(DEALS, [])
    client = FakeClient()
    client.serve(public, [res(1, "deals", stamp(1), title="one")])
    client.serve(private, [res(3, "deals", stamp(3), title="three")])
    evidence = Evidence(client, mirror)
    assert await evidence.fetch_found([public, unlisted, private], [1, 2, 3]) == {1, 3}
    assert [a for _, a in client.asked] == [
        (public.key, [1, 2, 3]),
        (unlisted.key, [1, 2, 3]),
        (private.key, [1, 2, 3]),
    ]
    rows = mirror.conn.execute("SELECT id, title FROM deals ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [(1, "one"), (3, "three")]
    assert await evidence.fetch_and_write([public], [1, 3]) == 1


async def test_only_ids_no_scope_serves_are_deleted(mirror: Mirror) -> None:
    table(mirror, "deals", [(1, stamp(1)), (2, stamp(1)), (3, stamp(1))])
    public, unlisted, private = scopes_of(DEALS, [])
    client = FakeClient()
    client.serve(unlisted, [res(2, "deals", stamp(2))])  # made Unlisted: still there
    evidence = Evidence(client, mirror)
    assert await evidence.confirm_and_delete([public, unlisted, private], [1, 2]) == 1
    assert ids(mirror, "deals") == [2, 3]
    assert await evidence.confirm_and_delete([public], [3, 99]) == 1  # 99 was never held
    assert ids(mirror, "deals") == [2]


async def test_a_mall_listing_404_is_gone_only_when_the_mall_is(mirror: Mirror) -> None:
    client = FakeClient()
    client.lost_listings = {7, 8}
    client.malls = {8}
    evidence = Evidence(client, mirror)
    # Mall 7 is gone: so are its rows.
    assert await evidence.confirm_gone([Scope(STORES, 7)], [1, 2]) == [1, 2]
    # Mall 8 is served while its listing answers 404: a failure, never a deletion.
    with pytest.raises(ListingMissingError) as caught:
        await evidence.confirm_gone([Scope(STORES, 8)], [1])
    assert caught.value.status == 404
    assert caught.value.message.startswith(
        "a listing of mall 8 answered 404 while GET /malls/8 serves the mall"
    )


async def test_a_top_level_404_is_raised(mirror: Mirror) -> None:
    """No mall to ask: a top-level listing's 404 is a failure, never "gone"."""

    class Lost(FakeClient):
        async def fetch_ids(self, scope: Scope, wanted: object) -> None:  # type: ignore[override]
            raise NotFoundError("route gone", url="/deals", status=404)

    table(mirror, "deals", [(1, stamp(1))])
    with pytest.raises(NotFoundError, match="route gone"):
        await Evidence(Lost(), mirror).confirm_and_delete([Scope(DEALS)], [1])
    assert ids(mirror, "deals") == [1]


async def test_confirm_mall_gone_returns_only_on_the_malls_own_404() -> None:
    client = FakeClient()
    exc = NotFoundError("x", url="http://u/malls/5/stores", status=404)
    await confirm_mall_gone(client, 5, exc)
    client.malls = {5}
    with pytest.raises(ListingMissingError, match="nothing was deleted"):
        await confirm_mall_gone(client, 5, exc)
    assert client.asked == [("resource", ("malls", 5)), ("resource", ("malls", 5))]
