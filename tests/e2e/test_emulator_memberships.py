"""The emulator's hard readings of mall membership (`sync.emulator.memberships`), each over real
HTTP: rows in several malls (`multi_mall`), silent moves between malls, a mall deleted alone, and
deals tied to malls only by their routes (`route_memberships`)."""

from __future__ import annotations

from sync.emulator.hard import Hard
from sync.emulator.memberships import MULTI_MALL_TYPES
from tests.support.emulator_client import (
    MakeEmulator,
    control,
    feed,
    listed,
    notices,
    signed,
    valid,
)


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
