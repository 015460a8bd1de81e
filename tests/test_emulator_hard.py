"""The emulator's hard readings of the spec (`sync.emulator.hard`), each switch over real HTTP:
what it serves when on, what stays as before when off, every document valid JSON:API, and the
strict profile with every switch on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from sync.commands import emulator as emulator_cmd
from sync.emulator import Emulator
from sync.emulator.dataset import Dataset
from sync.emulator.hard import STRICT_PAGE_BOUND, Hard
from sync.emulator.memberships import MULTI_MALL_TYPES
from tests.support.emulator_client import Signed, control, signed, valid

MakeEmulator = Callable[..., contextlib.AbstractAsyncContextManager[Emulator]]
Notice = tuple[str, str, int]


def notices(emu: Emulator) -> list[Notice]:
    """The notices the data set sends from now on: (kind, type, id)."""
    seen: list[Notice] = []
    emu.data.listeners.append(lambda kind, t, rid, _d: seen.append((kind, t, rid)))
    return seen


async def walk(api: Signed, path: str, params: dict[str, str] | None = None) -> list[Any]:
    """Every page of a listing, each checked against the JSON:API schema."""
    pages, number = [], 1
    while True:
        status, _, doc = await api.get(path, {**(params or {}), "page[number]": str(number)})
        assert status == 200, doc
        valid(doc)
        pages.append(doc)
        last = int(parse_qs(urlsplit(doc["links"]["last"]).query)["page[number]"][0])
        if number >= last:
            return pages
        number += 1


async def listed(api: Signed, path: str, params: dict[str, str] | None = None) -> list[str]:
    return [
        r["id"]
        for p in await walk(api, path, {"page[size]": "100", **(params or {})})
        for r in p["data"]
    ]


def feed(emu: Emulator) -> list[dict[str, Any]]:
    return list(emu.snapshot("deletions").values())


# -- the switches ------------------------------------------------------------------------------


def test_every_switch_is_off_by_default_and_strict_turns_them_all_on() -> None:
    """`Hard()` is the friendly reading; `Hard.strict()` every hard one, with a clamped bound
    of 30; a data set built with the switches off is the same data as before."""
    off = Hard()
    assert not off.on()
    strict = Hard.strict()
    assert set(strict.on()) == set(Hard.names()) - {"page_bound_refuse", "includes_allowed"}
    assert strict.page_bound == STRICT_PAGE_BOUND == 30 and strict.page_bound_refuse is False
    with pytest.raises(ValueError, match="unknown hard switch"):
        off.update({"spaceships": True})
    with pytest.raises(ValueError, match="page_bound"):
        off.update({"page_bound": -1})
    with pytest.raises(ValueError, match="true or false"):
        off.update({"reuse_ids": 1, "multi_mall": True})
    assert not off.on()  # nothing set when one value is wrong
    off.switch_on("reuse-ids")
    off.switch_on("page_bound=50")
    off.switch_on("reuse_ids=off")
    assert off.as_dict()["page_bound"] == 50 and not off.reuse_ids
    a, b = Dataset(resources=800, seed=4), Dataset(resources=800, seed=4, hard=Hard.strict())
    for t in a.by_type:
        assert [r.blob for r in a.by_type[t].values()] == [r.blob for r in b.by_type[t].values()]
    assert not a.memberships and b.memberships


async def test_reuse_ids(make_emulator: MakeEmulator) -> None:
    """`reuse_ids`: a create takes the id deleted last of its type, with stamps later than the
    deletion's feed entry and an update notice; without it, ids are never reused."""
    async with (
        make_emulator(resources=300, seed=3, hard=Hard(reuse_ids=True)) as emu,
        signed(emu) as api,
    ):
        seen = notices(emu)
        first, second = emu.ids("deals")[:2]
        emu.delete("deals", first)
        deletion = emu.delete("deals", second)
        entry = emu.snapshot("deletions")[deletion]
        new = emu.create("deals", {"title": "Back again", "visibility": "Public"})
        assert new == second  # the most recently deleted
        assert ("update", "deals", int(new)) in seen
        _, _, doc = await api.get("/deals", {"filter[id]": new})
        valid(doc)
        attrs = doc["data"][0]["attributes"]
        assert attrs["title"] == "Back again"
        assert (
            attrs["created_at"] > entry["created_at"] and attrs["updated_at"] > entry["created_at"]
        )
        _, _, gone = await api.get("/deletions", {"filter[resource_type]": "deals"})
        assert int(new) in [d["attributes"]["resource_id"] for d in gone["data"]]
        assert emu.create("deals") == first
        assert int(emu.create("deals")) > max(int(i) for i in emu.ids("deals")[:-1])
        emu.hard.reuse_ids = False
        emu.delete("stores", emu.ids("stores")[0])
        assert int(emu.create("stores")) > int(emu.ids("stores")[-2])


async def test_multi_mall(make_emulator: MakeEmulator) -> None:
    """`multi_mall`: about a third of the rows listed only under malls (and contacts) are in
    1-2 more malls, listed under each; a store's `mall` names its first; a deleted row leaves
    every mall's listing."""
    async with (
        make_emulator(resources=1500, seed=5, malls=6, hard=Hard(multi_mall=True)) as emu,
        signed(emu) as api,
    ):
        data = emu.data
        for type_name in MULTI_MALL_TYPES:
            ids = data.order[type_name]
            shared = [i for i in ids if len(data.malls_of(type_name, i)) > 1]
            assert 0.2 < len(shared) / len(ids) < 0.5, type_name
            assert all(len(data.malls_of(type_name, i)) <= 3 for i in ids)
        store = next(i for i in data.order["stores"] if len(data.malls_of("stores", i)) == 3)
        malls = data.malls_of("stores", store)
        assert malls == sorted(malls)
        for mall in malls:
            assert str(store) in await listed(api, f"/malls/{mall}/stores")
        _, _, doc = await api.get(
            f"/malls/{malls[1]}/stores", {"filter[id]": str(store), "include": "mall"}
        )
        valid(doc)
        assert doc["data"][0]["relationships"]["mall"]["data"] == {
            "type": "malls",
            "id": str(malls[0]),
        }
        contact = next(i for i in data.order["contacts"] if len(data.malls_of("contacts", i)) > 1)
        for mall in data.malls_of("contacts", contact):
            assert str(contact) in await listed(api, f"/malls/{mall}/contacts")
        deal = next(
            d
            for d in data.order["deals"]
            if data.by_type["deals"][d].get("is_local")
            and data.by_type["deals"][d].get("visibility") == "Public"
            and any(
                len(data.malls_of("stores", s)) > 1 for s in data.by_type["deals"][d].link("stores")
            )
        )
        deal_store = data.by_type["deals"][deal].link("stores")[0]
        assert data.malls_of("deals", deal) == data.malls_of("stores", deal_store)
        for mall in data.malls_of("deals", deal):
            assert str(deal) in await listed(api, f"/malls/{mall}/deals")
        emu.delete("stores", store)
        for mall in malls:
            assert str(store) not in await listed(api, f"/malls/{mall}/stores")
    async with make_emulator(resources=1500, seed=5, malls=6) as emu:
        assert all(len(emu.data.malls_of("stores", i)) == 1 for i in emu.data.order["stores"])


async def test_silent_moves(make_emulator: MakeEmulator) -> None:
    """`silent_moves`: random mutations move mall-scoped rows between malls with no notice and
    no new stamp; `Dataset.move` and the control route's `move` do one on demand."""
    async with (
        make_emulator(resources=600, seed=6, hard=Hard(silent_moves=True)) as emu,
        signed(emu) as api,
    ):
        before = {t: emu.snapshot(t) for t in ("stores", "events", "contacts", "products")}
        seen = notices(emu)
        done = emu.mutate_randomly(300, 11)
        moves = [(t, rid) for op, t, rid in done if op == "move"]
        assert len(moves) >= 5
        others = {(t, rid) for op, t, rid in done if op != "move"}
        for t, rid in moves:
            if (t, rid) in others or t not in before or rid not in emu.snapshot(t):
                continue
            assert emu.snapshot(t)[rid]["updated_at"] == before[t][rid]["updated_at"]
            assert not [n for n in seen if n[1:] == (t, int(rid))]
        store = emu.ids("stores")[0]
        home = emu.data.malls_of("stores", int(store))[0]
        away = next(m for m in emu.data.order["malls"] if m != home)
        stamp = emu.snapshot("stores")[store]["updated_at"]
        entries, count = len(feed(emu)), len(seen)
        status, doc = await control(
            emu, "PATCH", f"resources/stores/{store}", {"move": {"from": home, "to": away}}
        )
        assert status == 200, doc
        assert store not in await listed(api, f"/malls/{home}/stores")
        assert store in await listed(api, f"/malls/{away}/stores")
        _, _, doc = await api.get(f"/malls/{away}/stores", {"filter[id]": store, "include": "mall"})
        assert doc["data"][0]["attributes"]["updated_at"] == stamp
        assert doc["data"][0]["relationships"]["mall"]["data"]["id"] == str(away)
        assert len(feed(emu)) == entries and len(seen) == count
        for body, status_wanted in (
            ({"move": {"from": home, "to": away}}, 422),  # not in `home` any more
            ({"move": {"from": away, "to": 999_999}}, 422),
            ({"move": {"from": "x"}}, 400),
        ):
            assert (await control(emu, "PATCH", f"resources/stores/{store}", body))[
                0
            ] == status_wanted
        deal = emu.ids("deals")[0]
        assert (
            await control(
                emu, "PATCH", f"resources/deals/{deal}", {"move": {"from": home, "to": away}}
            )
        )[0] == 422
    async with make_emulator(resources=600, seed=6) as emu:
        assert not [op for op, _, _ in emu.mutate_randomly(300, 11) if op == "move"]


async def test_mall_delete_alone(make_emulator: MakeEmulator) -> None:
    """`mall_delete_alone`: deleting a mall writes one feed entry and one notice; rows only in
    it vanish from listings and `filter[id]` with neither; rows in other malls lose it; its
    routes answer 404."""
    hard = Hard(mall_delete_alone=True, multi_mall=True)
    async with make_emulator(resources=1200, seed=8, malls=5, hard=hard) as emu, signed(emu) as api:
        data = emu.data
        mall = data.order["malls"][0]
        alone = [s for s in data.by_mall[("stores", mall)] if data.malls_of("stores", s) == [mall]]
        shared = [s for s in data.by_mall[("stores", mall)] if len(data.malls_of("stores", s)) > 1]
        events = list(data.by_mall[("events", mall)])
        assert alone and shared and events
        seen, entries = notices(emu), len(feed(emu))
        assert (await control(emu, "DELETE", f"resources/malls/{mall}"))[0] == 204
        assert seen == [("deletion", "malls", mall)]
        assert len(feed(emu)) == entries + 1 and feed(emu)[-1]["resource_type"] == "malls"
        _, _, doc = await api.get("/events", {"filter[id]": ",".join(map(str, events))})
        valid(doc)
        assert doc["data"] == []
        other = data.malls_of("stores", shared[0])[0]
        assert mall not in data.malls_of("stores", shared[0])
        assert str(shared[0]) in await listed(api, f"/malls/{other}/stores")
        assert not {str(s) for s in alone} & set(emu.ids("stores"))
        for route in ("hours", "current-hours", "stores", "deals"):
            status, _, err = await api.get(f"/malls/{mall}/{route}")
            assert status == 404, route
            valid(err)
        assert (await api.get(f"/malls/{mall}"))[0] == 404
    async with make_emulator(resources=1200, seed=8, malls=5, hard=Hard(multi_mall=True)) as emu:
        data = emu.data
        mall = data.order["malls"][0]
        alone = [s for s in data.by_mall[("stores", mall)] if data.malls_of("stores", s) == [mall]]
        shared = [s for s in data.by_mall[("stores", mall)] if len(data.malls_of("stores", s)) > 1]
        seen = notices(emu)
        emu.delete("malls", mall)
        deleted = {(e["resource_type"], e["resource_id"]) for e in feed(emu)}
        assert {("stores", s) for s in alone} | {("malls", mall)} <= deleted
        assert all(("deletion", "stores", s) in seen for s in alone)
        assert not {("stores", s) for s in shared} & deleted  # they only leave the mall
        assert all(mall not in data.malls_of("stores", s) for s in shared)


async def test_page_bound(make_emulator: MakeEmulator) -> None:
    """`page_bound`: a larger `page[size]` is served the bound, the links carry the size
    served; `page_bound_refuse` answers it 400 naming `page[size]`."""
    async with (
        make_emulator(resources=600, seed=9, hard=Hard(page_bound=30)) as emu,
        signed(emu) as api,
    ):
        total = len(emu.ids("articles"))
        _, _, doc = await api.get("/articles", {"page[size]": "100"})
        valid(doc)
        assert len(doc["data"]) == 30
        for link in ("first", "last"):
            q = parse_qs(urlsplit(doc["links"][link]).query)
            assert q["page[size]"] == ["30"]
        last = parse_qs(urlsplit(doc["links"]["last"]).query)["page[number]"]
        assert last == [str(-(-total // 30))]
        assert len((await api.get("/articles", {"page[size]": "500"}))[2]["data"]) == 30
        assert len((await api.get("/articles", {"page[size]": "7"}))[2]["data"]) == 7
        assert len((await api.get("/articles"))[2]["data"]) == 25
        mall = emu.ids("malls")[0]
        _, _, doc = await api.get(f"/malls/{mall}/stores", {"page[size]": "100"})
        assert len(doc["data"]) == min(30, len(emu.ids("stores", mall_id=mall)))
        status, answer = await control(
            emu, "PATCH", "settings", {"hard": {"page_bound_refuse": True}}
        )
        assert status == 200 and answer["hard"]["page_bound_refuse"] is True
        status, _, err = await api.get("/articles", {"page[size]": "31"})
        assert status == 400 and err["errors"][0]["source"]["parameter"] == "page[size]"
        valid(err)
        assert len((await api.get("/articles", {"page[size]": "30"}))[2]["data"]) == 30
        assert (await control(emu, "PATCH", "settings", {"hard": {"page_bound": 0}}))[0] == 200
        assert len((await api.get("/articles", {"page[size]": "100"}))[2]["data"]) == min(
            100, total
        )


async def test_shifting_listings(make_emulator: MakeEmulator) -> None:
    """`shifting_listings`: every third request for a page >= 2, a row of an earlier page leaves
    the listing (a deal made Private for real, a store moved silently on a mall route), so a
    walk by page number misses rows that stayed listed."""
    async with (
        make_emulator(resources=1500, seed=10, hard=Hard(shifting_listings=True)) as emu,
        signed(emu) as api,
    ):
        seen = notices(emu)
        public = set(emu.ids("deals", visibility="Public"))
        walked = [
            r["id"] for p in await walk(api, "/deals", {"page[size]": "10"}) for r in p["data"]
        ]
        assert emu.data.shifted >= 2
        now_public = set(emu.ids("deals", visibility="Public"))
        assert len(now_public) == len(public) - emu.data.shifted
        assert now_public - set(walked)  # rows still listed that the walk never saw
        private = public - now_public
        assert all(("update", "deals", int(d)) in seen for d in private)
        assert all(emu.snapshot("deals")[d]["visibility"] == "Private" for d in private)
        mall = max(emu.data.order["malls"], key=lambda m: len(emu.ids("stores", mall_id=m)))
        stores = emu.snapshot("stores")
        before, shifted = list(emu.ids("stores", mall_id=mall)), emu.data.shifted
        walked = [
            r["id"]
            for p in await walk(api, f"/malls/{mall}/stores", {"page[size]": "5"})
            for r in p["data"]
        ]
        moved = set(before) - set(emu.ids("stores", mall_id=mall))
        assert moved and len(moved) == emu.data.shifted - shifted
        assert set(emu.ids("stores", mall_id=mall)) - set(walked)
        for store in moved:
            assert emu.snapshot("stores")[store]["updated_at"] == stores[store]["updated_at"]
            assert emu.mall_of("stores", store) != str(mall)
        asks = emu.data.shift_asks
        await api.get("/deletions", {"page[number]": "2"})
        await api.get("/deals", {"page[number]": "1"})
        assert emu.data.shift_asks == asks  # neither counts
    async with make_emulator(resources=1500, seed=10) as emu, signed(emu) as api:
        public = set(emu.ids("deals", visibility="Public"))
        walked = [
            r["id"] for p in await walk(api, "/deals", {"page[size]": "10"}) for r in p["data"]
        ]
        assert set(walked) == public and emu.data.shifted == 0


#: Owners of images with a top-level route, and the filter that lists every one of them.
ROUTED: dict[str, dict[str, str]] = {
    "deals": {"filter[visibility]": "Public,Unlisted,Private"},
    "articles": {},
    "events": {},
}


async def test_sideload_deletions(make_emulator: MakeEmulator) -> None:
    """`sideload_deletions`: random mutations also delete images, tags and groups, each with a
    feed entry and a notice, dropped from its owners' linkage under unchanged stamps."""
    async with (
        make_emulator(resources=800, seed=12, hard=Hard(sideload_deletions=True)) as emu,
        signed(emu) as api,
    ):
        data = emu.data
        owners = {i: data.owners.get(("images", i)) for i in data.order["images"]}
        stamps = {t: emu.snapshot(t) for t in ROUTED}
        seen = notices(emu)
        done = emu.mutate_randomly(200, 3)
        gone = {
            (t, int(rid))
            for op, t, rid in done
            if op == "delete" and t in ("images", "tags", "groups")
        }
        assert {t for t, _ in gone} == {"images", "tags", "groups"}
        _, _, doc = await api.get(
            "/deletions", {"filter[resource_type]": "images,tags,groups", "page[size]": "100"}
        )
        valid(doc)
        fed = {
            (d["attributes"]["resource_type"], d["attributes"]["resource_id"]) for d in doc["data"]
        }
        assert gone <= fed
        assert all(("deletion", t, rid) in seen for t, rid in gone)
        touched = {(t, rid) for op, t, rid in done if op != "delete"}
        checked = 0
        for _, image in (g for g in gone if g[0] == "images"):
            for owner_type, owner in owners[image]:
                key = (owner_type, str(owner))
                if owner_type not in ROUTED or key in touched or key[1] not in stamps[owner_type]:
                    continue
                if key[1] not in emu.snapshot(owner_type):
                    continue
                params = {"filter[id]": key[1], "include": "images", **ROUTED[owner_type]}
                _, _, doc = await api.get(f"/{owner_type}", params)
                valid(doc)
                linked = [d["id"] for d in doc["data"][0]["relationships"]["images"]["data"]]
                assert str(image) not in linked
                stamp = stamps[owner_type][key[1]]["updated_at"]
                assert doc["data"][0]["attributes"]["updated_at"] == stamp
                checked += 1
        assert checked
    async with make_emulator(resources=800, seed=12) as emu:
        done = emu.mutate_randomly(200, 3)
        assert not [t for op, t, _ in done if t in ("images", "tags", "groups")]


async def test_route_memberships(make_emulator: MakeEmulator) -> None:
    """`route_memberships`: `/malls?include=contacts` and `include=deals` serve links only (no
    400, nothing included); a mall's deals are an explicit membership of 1-3 malls a deal (1-2
    for a created one)."""
    async with (
        make_emulator(resources=900, seed=13, malls=5, hard=Hard(route_memberships=True)) as emu,
        signed(emu) as api,
    ):
        data = emu.data
        for include in ("contacts", "deals", "contacts,deals,images"):
            status, _, doc = await api.get("/malls", {"include": include})
            assert status == 200, doc
            valid(doc)
            for mall in doc["data"]:
                rels = mall["relationships"]
                assert "data" not in rels["contacts"] and "data" not in rels["deals"]
                assert set(rels["contacts"]["links"]) == {"self", "related"}
            assert not [r for r in doc.get("included", []) if r["type"] in ("contacts", "deals")]
        _, _, doc = await api.get("/malls", {"include": "images"})
        assert "data" in doc["data"][0]["relationships"]["images"]
        assert all(1 <= len(data.malls_of("deals", d)) <= 3 for d in data.order["deals"])
        mall = data.order["malls"][0]
        expected = sorted(
            str(d)
            for d in data.order["deals"]
            if mall in data.malls_of("deals", d)
            and data.by_type["deals"][d].get("visibility") == "Public"
        )
        assert sorted(await listed(api, f"/malls/{mall}/deals")) == expected
        assert expected != sorted(
            str(d)
            for d in data.mall_deals(mall)
            if data.by_type["deals"][d].get("visibility") == "Public"
        )
        new = int(emu.create("deals", {"visibility": "Public"}))
        assert 1 <= len(data.malls_of("deals", new)) <= 2
        for m in data.malls_of("deals", new):
            assert str(new) in await listed(api, f"/malls/{m}/deals")
        contact = data.order["contacts"][0]
        assert str(contact) in await listed(
            api, f"/malls/{data.malls_of('contacts', contact)[0]}/contacts"
        )
    async with make_emulator(resources=900, seed=13, malls=5) as emu, signed(emu) as api:
        _, _, doc = await api.get("/malls", {"include": "contacts"})
        assert "data" in doc["data"][0]["relationships"]["contacts"]


async def test_no_include_linkage(make_emulator: MakeEmulator) -> None:
    """`no_include_linkage`: `/malls?include=<members>` serves those relationships with links
    only (not a 400, nothing included); a mall's images and other types' includes keep theirs."""
    async with (
        make_emulator(resources=600, seed=14, hard=Hard(no_include_linkage=True)) as emu,
        signed(emu) as api,
    ):
        status, _, doc = await api.get(
            "/malls", {"include": "stores,events,contacts,deals,products,images"}
        )
        assert status == 200, doc
        valid(doc)
        rels = doc["data"][0]["relationships"]
        for name in ("stores", "events", "contacts", "deals", "products", "programs"):
            assert "data" not in rels[name], name
        assert "data" in rels["images"]
        assert {r["type"] for r in doc.get("included", [])} <= {"images"}
        mall = emu.ids("malls")[0]
        _, _, single = await api.get(f"/malls/{mall}", {"include": "stores.images"})
        valid(single)
        assert "data" not in single["data"]["relationships"]["stores"] and "included" not in single
        _, _, deals = await api.get("/deals", {"include": "images,tags"})
        valid(deals)
        assert "data" in deals["data"][0]["relationships"]["images"]
        _, _, articles = await api.get("/articles", {"include": "malls.events", "page[size]": "50"})
        valid(articles)
        assert all("data" not in m["relationships"]["events"] for m in articles.get("included", []))
    async with make_emulator(resources=600, seed=14) as emu, signed(emu) as api:
        assert (await api.get("/malls", {"include": "stores"}))[0] == 400
        _, _, doc = await api.get("/malls", {"include": "events"})
        assert "data" in doc["data"][0]["relationships"]["events"]


# -- the strict profile and the ways to switch --------------------------------------------------


async def test_the_strict_profile_serves_valid_walks(make_emulator: MakeEmulator) -> None:
    """`Emulator(profile="strict")` has every switch on and serves full walks of a mall's stores
    and of `/deals` that validate, pages of at most the bound."""
    async with make_emulator(resources=2000, seed=15, profile="strict") as emu, signed(emu) as api:
        assert emu.hard == Hard.strict() and emu.hard is emu.data.hard is emu.app.hard
        mall = emu.ids("malls")[0]
        for path in (f"/malls/{mall}/stores", "/deals"):
            pages = await walk(api, path, {"page[size]": "100"})
            assert len(pages) > 1 and all(len(p["data"]) <= 30 for p in pages)
        assert emu.data.shifted >= 1


async def test_settings_switch_the_hard_readings_of_a_running_emulator(
    make_emulator: MakeEmulator,
) -> None:
    """`PATCH /_emulator/settings {"hard": {...}}` sets switches and answers them; a switch
    that needs memberships builds them on the spot, and drops them when switched off."""
    async with make_emulator(resources=900, seed=16, malls=4) as emu, signed(emu) as api:
        status, answer = await control(emu, "GET", "settings")
        assert status == 200 and answer["hard"] == Hard().as_dict()
        status, answer = await control(
            emu, "PATCH", "settings", {"hard": {"multi_mall": True, "page_bound": 20}, "latency": 0}
        )
        assert (
            status == 200
            and answer["hard"]["multi_mall"] is True
            and answer["hard"]["page_bound"] == 20
        )
        assert emu.hard.multi_mall and emu.data.memberships
        shared = next(
            s for s in emu.data.order["stores"] if len(emu.data.malls_of("stores", s)) > 1
        )
        for mall in emu.data.malls_of("stores", shared):
            assert str(shared) in await listed(api, f"/malls/{mall}/stores")
        assert (await control(emu, "PATCH", "settings", {"hard": {"multi_mall": False}}))[0] == 200
        mall = emu.data.malls_of("stores", shared)
        assert len(mall) == 1
        assert not emu.data.memberships
        for bad in ({"hard": {"nope": True}}, {"hard": {"page_bound": "x"}}, {"hard": []}):
            status, err = await control(emu, "PATCH", "settings", bad)
            assert status == 400, bad
            valid(err)


def test_cli_profile_and_hard_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ccsync emulator --profile strict` and `--hard NAME[=VALUE]` (repeatable) set the
    switches the emulator serves with; an unknown name is a usage error."""
    served: list[Emulator] = []

    async def serve(emu: Emulator, *_: Any) -> None:
        served.append(emu)

    monkeypatch.setattr(emulator_cmd, "serve_forever", serve)
    run = CliRunner().invoke
    result = run(emulator_cmd.emulator_command, ["--resources", "200", "--profile", "strict"])
    assert result.exit_code == 0, result.output
    assert served[-1].hard == Hard.strict()
    result = run(
        emulator_cmd.emulator_command,
        [
            "--resources",
            "200",
            "--hard",
            "reuse_ids",
            "--hard",
            "page_bound=40",
            "--hard",
            "multi-mall",
        ],
    )
    assert result.exit_code == 0, result.output
    assert served[-1].hard == Hard(reuse_ids=True, page_bound=40, multi_mall=True)
    result = run(
        emulator_cmd.emulator_command,
        ["--resources", "200", "--profile", "strict", "--hard", "multi_mall=false"],
    )
    assert served[-1].hard.on() == [n for n in Hard.strict().on() if n != "multi_mall"]
    result = run(emulator_cmd.emulator_command, ["--resources", "200", "--hard", "spaceships"])
    assert result.exit_code == 2 and "unknown hard switch" in result.output
    assert "--profile" in run(emulator_cmd.emulator_command, ["--help"]).output
