"""`sync.jobs.malls.mallroutes`: the malls' contacts from `include=contacts` when it serves linkage,
else from every mall's route (its pages side by side, a mall gone passed over); the decision
and what it rests on kept in `_sync_meta`."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from sync.core.errors import ListingUnsettledError, NotFoundError, UpstreamError
from sync.jobs.malls.mallroutes import META_KEY, ROUTE_WALKS, WHY_KEY, MallRoutes
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, page, res, stamp, table

CONTACTS = catalogue.TYPES["contacts"]


class MallsClient(FakeClient):
    """`GET /malls?include=contacts` answers malls with `linkage` (or refuses it: `refuse`)."""

    def __init__(self, linkage: Any = None, refuse: int | None = None) -> None:
        super().__init__(size=2)
        self.settings = SimpleNamespace(concurrency=2)
        self.linkage = linkage
        self.refuse = refuse

    async def list_members(
        self, rels: Sequence[str], number: int, *, size: int, etag: str | None = None
    ) -> tuple[Any, None]:
        self.asked.append(("members", (tuple(rels), number, size)))
        if self.refuse is not None:
            raise UpstreamError("include refused", url="/malls", status=self.refuse)
        mall = res(1, "malls", stamp(1)) | {"relationships": {"contacts": self.linkage}}
        return page([mall]), None


def _meta(mirror: Mirror, key: str) -> Any:
    row = mirror.conn.execute("SELECT value FROM _sync_meta WHERE key = ?", (key,)).fetchone()
    return orjson.loads(row[0])


async def test_contacts_linked_through_include_need_no_route(mirror: Mirror) -> None:
    client = MallsClient(linkage={"data": [{"type": "contacts", "id": "4"}]})
    assert await MallRoutes(client, mirror).refresh(["contacts"], [1, 2]) == {}
    assert client.asked == [("members", (("contacts",), 1, 1))]
    assert _meta(mirror, META_KEY) == {"contacts": "include"}
    assert _meta(mirror, WHY_KEY) == {"contacts": "GET /malls?include=contacts serves linkage"}


async def test_without_linkage_every_malls_route_fills_its_contacts(mirror: Mirror) -> None:
    client = MallsClient(linkage={"links": {"related": "/malls/1/contacts"}})
    routed = Scope(CONTACTS, 1)  # the route lists contacts per mall: scope key `mall=1`
    client.served[("contacts", routed.key)] = [
        res(i, "contacts", stamp(i)) for i in (9, 3, 5, 7, 1)
    ]
    client.lost_listings = {2}  # mall 2 is gone: GET /malls/2 answers 404 too
    table(mirror, "malls", [(1, stamp(1)), (2, stamp(1))])
    table(mirror, "contacts", [(i, stamp(i)) for i in (1, 3, 5, 7, 9)])
    routes = MallRoutes(client, mirror)
    assert await routes.refresh(["contacts"], [1, 2]) == {"contacts": 5}
    held = mirror.conn.execute("SELECT malls_id, contacts_id FROM malls_contacts").fetchall()
    assert sorted(tuple(r) for r in held) == [(1, 1), (1, 3), (1, 5), (1, 7), (1, 9)]
    # Five rows at two a page: page 1, then pages 2 and 3 that its `links.last` names.
    assert [a[2] for k, a in client.asked if k == "list" and a[1] == "mall=1"] == [1, 2, 3]
    assert ("resource", ("malls", 2)) in client.asked
    assert routes.decisions() == {"contacts": "route"}
    assert routes.reasons() == {"contacts": "GET /malls?include=contacts serves no linkage"}


async def test_a_refused_include_means_the_routes_and_a_throttle_is_raised(mirror: Mirror) -> None:
    refused = MallsClient(refuse=400)
    assert await MallRoutes(refused, mirror).refresh(["contacts"], [1]) == {"contacts": 0}
    assert MallRoutes(refused, mirror).decisions() == {"contacts": "route"}
    with pytest.raises(UpstreamError):
        await MallRoutes(MallsClient(refuse=429), mirror).refresh(["contacts"], [1])


async def test_no_deal_mirrored_leaves_the_derivation_unchecked(mirror: Mirror) -> None:
    client = MallsClient()
    routes = MallRoutes(client, mirror)
    assert await routes.refresh(["deals"], [1], check_deals=False) == {}
    assert routes.decisions() == {"deals": "unchecked"}
    assert routes.reasons() == {"deals": "no deal mirrored yet"}
    assert routes.deals_unproven() is True
    assert client.asked == []
    # No malls: nothing to decide, nothing asked.
    assert await MallRoutes(client, mirror).refresh(["contacts", "deals"], []) == {}


def test_a_damaged_record_reads_as_no_decision(mirror: Mirror) -> None:
    mirror.conn.executemany(
        "INSERT INTO _sync_meta (key, value) VALUES (?, ?)", [(META_KEY, "{x"), (WHY_KEY, "[1]")]
    )
    mirror.conn.commit()
    routes = MallRoutes(MallsClient(), mirror)
    assert routes.decisions() == {} and routes.reasons() == {}
    assert routes.deals_unproven() is False


class ShrinkingClient(MallsClient):
    """Mall 1's contacts route: the first request for page 3 finds a row gone (the listing
    shrinks to two pages) and answers 404 (`always`: every page past the first answers 404,
    and page 1 promises two pages at a walk's start and one when asked again)."""

    def __init__(self, *, always: bool = False, empty: bool = False) -> None:
        super().__init__(linkage={"links": {"related": "/malls/1/contacts"}})
        self.malls = {1}  # `GET /malls/1` serves the mall: a 404 of its route is no deletion
        self.always = always
        self.empty = empty  # past the end is an empty page, not a 404
        self.firsts = 0
        self.shrunk = False

    async def list_page(self, request: Any, number: int, **kw: Any) -> Any:
        rows = self.served[("contacts", Scope(CONTACTS, 1).key)]
        if self.always:
            if number == 1:
                self.firsts += 1
                got = await super().list_page(request, 1, **kw)
                return page(got.resources, 1, 2 if self.firsts % 2 else 1)
            raise NotFoundError("Invalid page.", url="/malls/1/contacts", status=404)
        if number == 3 and not self.shrunk:
            self.shrunk = True
            rows.pop(1)  # contact 3 leaves the mall: 5 and the rest move up a place
            if self.empty:
                return page([], 3, 2)
            raise NotFoundError("Invalid page.", url="/malls/1/contacts", status=404)
        return await super().list_page(request, number, **kw)


def _routed(mirror: Mirror, client: ShrinkingClient) -> MallRoutes:
    client.served[("contacts", Scope(CONTACTS, 1).key)] = [
        res(i, "contacts", stamp(i)) for i in (1, 3, 5, 7, 9)
    ]
    table(mirror, "malls", [(1, stamp(1))])
    table(mirror, "contacts", [(i, stamp(i)) for i in (1, 3, 5, 7, 9)])
    return MallRoutes(client, mirror)


async def test_a_mall_route_that_shrank_under_its_walk_is_walked_again_not_called_lost(
    mirror: Mirror,
) -> None:
    """Before: the 404 of a page page 1 no longer promised was taken for the mall's listing
    lost (`ListingMissingError`, a strict chaos backfill exited 1 on it)."""
    client = ShrinkingClient()
    assert await _routed(mirror, client).refresh(["contacts"], [1]) == {"contacts": 4}
    held = mirror.conn.execute("SELECT contacts_id FROM malls_contacts ORDER BY 1").fetchall()
    assert [r[0] for r in held] == [1, 5, 7, 9]


async def test_a_mall_route_that_shrank_to_an_empty_page_is_walked_again(mirror: Mirror) -> None:
    """Before: only a 404 was noticed; a promised page served empty was read as the end, and
    contact 9, moved onto page 2 after page 2 was read, lost its membership."""
    client = ShrinkingClient(empty=True)
    assert await _routed(mirror, client).refresh(["contacts"], [1]) == {"contacts": 4}
    held = mirror.conn.execute("SELECT contacts_id FROM malls_contacts ORDER BY 1").fetchall()
    assert [r[0] for r in held] == [1, 5, 7, 9]


async def test_a_mall_route_that_shrinks_under_every_walk_is_unsettled(mirror: Mirror) -> None:
    client = ShrinkingClient(always=True)
    with pytest.raises(ListingUnsettledError, match=f"shrank under each of {ROUTE_WALKS} walks"):
        await _routed(mirror, client).refresh(["contacts"], [1])
    assert client.firsts == 2 * ROUTE_WALKS  # each walk's page 1, and its promise asked again
