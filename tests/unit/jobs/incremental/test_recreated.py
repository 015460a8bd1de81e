"""`sync.jobs.incremental.recreated`: a row created again under a deleted id has its owners asked again
(owners without a route lose the link), its malls asked, and each row is settled once."""

from __future__ import annotations

from typing import Any

import pytest

from sync.core.errors import ListingMissingError
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.recreated import Recreated
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.pipeline.staging import stage_resources
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, res, stamp

DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]
TAGS = catalogue.TYPES["tags"]


def _linking(rid: int, type_: str, rel: str, targets: list[int], **attrs: Any) -> dict[str, Any]:
    row = res(rid, type_, stamp(5), **attrs)
    data = [{"type": "tags", "id": str(t)} for t in targets]
    return {**row, "relationships": {rel: {"data": data}}}


def _pairs(mirror: Mirror, table: str) -> list[tuple[int, int]]:
    rows = mirror.conn.execute(f"SELECT * FROM [{table}] ORDER BY 1, 2").fetchall()
    return [(int(r[0]), int(r[1])) for r in rows]


async def test_owners_are_fetched_again_and_owners_without_a_route_lose_the_link(
    mirror: Mirror,
) -> None:
    """Tag 7 deleted and created again: deal 2 (a route: asked again in every visibility)
    no longer links it; image 3 (no route) loses its link as the deletion would have taken it;
    tag 8, never recreated, keeps its links."""
    image = _linking(3, "images", "tags", [7, 8])
    deal = _linking(2, "deals", "tags", [7, 8], visibility="Public")
    mirror.write_staged(stage_resources(DEALS, [deal], [image]))
    mirror.write_staged(stage_resources(TAGS, [res(7, "tags", stamp(30))]))
    assert _pairs(mirror, "deals_tags")[:2] == [(2, 7), (2, 8)]
    client = FakeClient()
    public = scopes_of(DEALS, [])[0]
    client.serve(public, [_linking(2, "deals", "tags", [8], visibility="Public")])
    recreated = Recreated(Evidence(client, mirror))
    asked = await recreated.settle({"tags": [7]})
    assert [p[:2] for p in _pairs(mirror, "deals_tags")] == [(2, 8)]
    assert [p[:2] for p in _pairs(mirror, "images_tags")] == [(3, 8)]
    assert asked == 3  # deal 2 in each of the three visibilities
    assert await recreated.settle({"tags": [7]}) == 0  # settled: nothing asked again


async def test_a_mall_scoped_row_created_again_leaves_the_malls_that_no_longer_serve_it(
    mirror: Mirror,
) -> None:
    for mall in (1, 2):
        mirror.write_staged(stage_resources(STORES, [res(11, "stores", stamp(30))], (), mall))
    client = FakeClient()
    client.serve(Scope(STORES, 1), [res(11, "stores", stamp(30))])
    recreated = Recreated(Evidence(client, mirror))
    assert await recreated.settle({"stores": [11]}) == 2
    assert mirror.table("stores").malls_of(11) == [1]
    assert [r for r in mirror.conn.execute("SELECT id FROM stores")] == [(11,)]  # it stays


async def test_an_owner_s_mall_gone_is_skipped_and_a_mall_still_served_is_a_failure(
    mirror: Mirror,
) -> None:
    """Store 11, linking the recreated tag 7, is listed in mall 3, whose listing answers 404:
    `GET /malls/3` answers 404 too, so the mall is gone and the settle goes on; were mall 3
    still served, the 404 would be a failure, raised (the next poll asks again)."""
    store = _linking(11, "stores", "tags", [7])
    mirror.write_staged(stage_resources(STORES, [store], (), 3))
    client = FakeClient()
    client.lost_listings = {3}
    recreated = Recreated(Evidence(client, mirror))
    assert await recreated.settle({"tags": [7]}) == 1
    assert ("resource", ("malls", 3)) in client.asked
    client.malls = {3}
    again = Recreated(Evidence(client, mirror))
    with pytest.raises(ListingMissingError, match="GET /malls/3 serves the mall"):
        await again.settle({"tags": [7]})


async def test_a_mall_created_again_keeps_only_the_members_it_serves(mirror: Mirror) -> None:
    mirror.write_staged(
        stage_resources(STORES, [res(11, "stores", stamp(5)), res(12, "stores", stamp(5))], (), 3)
    )
    client = FakeClient()
    client.serve(Scope(STORES, 3), [res(12, "stores", stamp(5))])
    recreated = Recreated(Evidence(client, mirror))
    assert await recreated.settle({"malls": [3]}) == 1
    assert list(mirror.table("stores").ids(mall_id=3)) == [12]
    assert ("ids", ("mall=3", [11, 12])) in client.asked
