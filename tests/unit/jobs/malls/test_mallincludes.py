"""`sync.jobs.malls.mallincludes`: the fast path's detection per type, its poll fetching only stale
members in the mall that names them (a 304 fetching nothing), and the recently active malls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from sync.channel.pages import Page
from sync.core.errors import BadResponseError, UpstreamError
from sync.jobs.evidence import Evidence
from sync.jobs.malls import mallincludes
from sync.jobs.malls.mallincludes import (
    INCLUDE,
    PER_MALL,
    Decision,
    MallIncludes,
    recorded,
    refused,
)
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.staging import stage_resources
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, ids, page, res, stamp, table

STORES = catalogue.TYPES["stores"]
PRODUCTS = catalogue.TYPES["products"]
PROGRAMS = catalogue.TYPES["programs"]


def test_what_refuses_the_fast_path_and_what_is_transient() -> None:
    assert refused(UpstreamError("bad include", status=400))
    assert refused(UpstreamError("no", status=404))
    assert refused(BadResponseError("not a collection"))
    assert not refused(UpstreamError("login", status=401))
    assert not refused(UpstreamError("slow down", status=429))
    assert not refused(UpstreamError("down", status=503))


class MembersClient(FakeClient):
    """`GET /malls?include=<rels>`: `malls` maps a mall id to its members per type; a type in
    `unserved` answers 400; `linkless` types come without linkage."""

    def __init__(self, malls: dict[int, dict[str, list[tuple[int, str]]]]) -> None:
        super().__init__()
        self.members = malls
        self.unserved: set[str] = set()
        self.linkless: set[str] = set()
        self.etag = 'W/"1"'

    async def list_members(
        self, rels: Sequence[str], number: int, *, size: int, etag: str | None = None
    ) -> tuple[Any, str | None]:
        self.asked.append(("members", (tuple(rels), number, etag)))
        if set(rels) & self.unserved:
            raise UpstreamError("include refused", url="/malls", status=400)
        if etag == self.etag:
            return Page([], [], {}, number, number, None, not_modified=True), etag
        malls, included = [], []
        for mid, by_type in sorted(self.members.items()):
            relationships = {}
            for name in rels:
                members = by_type.get(name, [])
                data = [{"type": name, "id": str(i)} for i, _ in members]
                relationships[name] = {"links": {}} if name in self.linkless else {"data": data}
                included += [res(i, name, s) for i, s in members]
            malls.append(res(mid, "malls", stamp(1)) | {"relationships": relationships})
        return page(malls, number, 1, included=included), self.etag


def _includes(
    client: MembersClient, mirror: Mirror, types: Sequence[Any] = (STORES,), **kw: Any
) -> MallIncludes:
    evidence = Evidence(client, mirror)
    return MallIncludes(client, mirror, evidence, types, lambda: [1, 2], **kw)


async def test_off_in_config_decides_per_mall_without_a_request(mirror: Mirror) -> None:
    client = MembersClient({})
    types = [STORES, PRODUCTS, PROGRAMS, catalogue.TYPES["deals"]]  # deals: not mall-scoped
    includes = _includes(client, mirror, types, enabled=False)
    assert [t.name for t in includes.types] == ["stores", "products", "programs"]
    decided = await includes.detect()
    off = Decision(PER_MALL, 'off in config ([upstream] mall_includes = "off")')
    assert decided == {"stores": off, "products": off, "programs": off}
    assert client.asked == []
    record = recorded(mirror)
    assert record is not None
    assert record["types"]["stores"] == {"mode": "per_mall", "reason": off.reason}


async def test_refused_together_each_type_is_asked_alone(mirror: Mirror) -> None:
    client = MembersClient({1: {"stores": [(5, stamp(1))], "products": [(6, stamp(1))]}})
    client.unserved = {"programs"}
    client.linkless = {"products"}
    decided = await _includes(client, mirror, [STORES, PRODUCTS, PROGRAMS]).detect()
    assert decided == {
        "stores": Decision(INCLUDE, "GET /malls?include=stores, 100 malls a request"),
        "products": Decision(PER_MALL, "GET /malls?include=products serves no linkage"),
        "programs": Decision(PER_MALL, "GET /malls?include=programs answered 400"),
    }
    assert [a[0] for k, a in client.asked] == [
        ("stores", "products", "programs"),
        ("stores",),
        ("products",),
        ("programs",),
    ]


async def test_the_poll_fetches_only_stale_members_and_a_304_fetches_nothing(
    mirror: Mirror,
) -> None:
    table(mirror, "stores", [(1, stamp(1)), (2, stamp(5))])
    client = MembersClient({7: {"stores": [(1, stamp(3)), (2, stamp(5)), (3, stamp(1))]}})
    client.serve(Scope(STORES, 7), [res(1, "stores", stamp(3)), res(3, "stores", stamp(1))])
    includes = _includes(client, mirror)
    await includes.detect()
    assert [t.name for t in includes.fast()] == ["stores"]
    assert await includes.poll() == {"stores": 2}
    assert [a for k, a in client.asked if k == "ids"] == [("mall=7", [1, 3])]
    assert ids(mirror, "stores") == [1, 2, 3]
    assert list(includes.hot) == [7]
    client.asked.clear()
    assert await includes.poll() == {"stores": 0}  # the kept ETag: 304
    assert client.asked == [("members", (("stores",), 1, 'W/"1"'))]


async def test_a_member_not_served_in_its_mall_is_not_asked_again_until_it_changes(
    mirror: Mirror,
) -> None:
    table(mirror, "stores", [])
    client = MembersClient({7: {"stores": [(4, stamp(2))]}})
    client.etag = ""  # no ETag: every poll reads the page
    includes = _includes(client, mirror)
    await includes.detect()
    await includes.poll()
    await includes.poll()
    assert [a for k, a in client.asked if k == "ids"] == [("mall=7", [4])]
    client.members[7]["stores"] = [(4, stamp(3))]
    await includes.poll()
    assert [a for k, a in client.asked if k == "ids"] == [("mall=7", [4]), ("mall=7", [4])]


def test_recently_active_malls_are_bounded_and_their_pages_come_first(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mallincludes, "HOT_MALLS", 2)
    includes = MallIncludes(
        MembersClient({}),
        mirror,
        None,  # type: ignore[arg-type]
        [STORES],
        lambda: list(range(1, 11)),
        page_size=3,
    )
    for mall in (2, 9, 5, 9):
        includes.touch(mall)
    assert list(includes.hot) == [5, 9]
    assert includes.pages() == 4
    # Mall 9 (page 3) was the latest, then mall 5 (page 2); then every page in order.
    assert includes._hot_pages() == [3, 2, 1, 4]


async def test_a_creation_is_looked_for_in_ten_malls_at_most_on_the_per_mall_path(
    mirror: Mirror,
) -> None:
    """#47: a store the mirror lacks, at 1,000 malls on the per-mall path: asked by
    `filter[id]` in the recently active malls, then in those whose stores changed last,
    `LOCATE_MALLS` requests at most, never one per mall (1,000 before)."""
    from sync.jobs.malls.mallincludes import LOCATE_MALLS

    malls = list(range(1, 1001))
    for i in range(1, 201):  # store i in mall 5 i, the last changed: store 49
        mirror.write_staged(stage_resources(STORES, [res(i, "stores", stamp(i % 50))], (), i * 5))
    client = FakeClient()
    client.serve(Scope(STORES, 245), [res(9999, "stores", stamp(60))])  # store 49's mall
    members = MallIncludes(client, mirror, Evidence(client, mirror), [STORES], lambda: malls)
    assert members.mode(STORES) == "per_mall"
    members.touch(3)
    found = await members.locate(STORES, [9999])
    asked = [a for k, a in client.asked if k == "ids"]
    assert len(asked) <= LOCATE_MALLS == 10
    assert found == {9999}  # mall 245 lists the store changed last (stamp 49)
    assert asked[0] == ("mall=3", [9999])
