"""The emulator's hard readings of the spec (`sync.emulator.hard`), each switch over real HTTP:
what it serves when on, what stays as before when off, every document valid JSON:API, and the
strict profile with every switch on."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from sync.commands import emulator as emulator_cmd
from sync.emulator import Emulator
from sync.emulator.dataset import Dataset
from sync.emulator.hard import STRICT_PAGE_BOUND, Hard
from tests.support.emulator_client import (
    MakeEmulator,
    control,
    listed,
    notices,
    signed,
    valid,
    walk,
)

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


def test_whole_second_stamps_share_a_second_and_never_go_back() -> None:
    """Under `whole_second_stamps` every stamp issued ends `.000Z`; changes of a row within one
    second keep one stamp (two versions under it), a deletion entry and the row created again
    in its second share it, and no stamp goes back, not even below an older fractional one."""
    now = [1_800_000_000.25]
    data = Dataset(resources=300, seed=4, hard=Hard(whole_second_stamps=True))
    data.now = lambda: now[0]  # type: ignore[method-assign]
    rid = data.ids("articles")[0]
    first = data.update("articles", rid, {"title": "one"}).decoded()
    second = data.update("articles", rid, {"title": "two"}).decoded()
    assert first["updated_at"] == second["updated_at"] == "2027-01-15T08:00:00.000Z"
    assert (first["title"], second["title"]) == ("one", "two")
    entry = data.delete("articles", rid).decoded()
    again = data.create("articles", rid=rid).decoded()
    assert entry["created_at"] == again["updated_at"] == "2027-01-15T08:00:00.000Z"
    now[0] += 1.5
    later = data.update("articles", rid).decoded()["updated_at"]
    assert later == "2027-01-15T08:00:01.000Z"
    assert data.stamps.fresh(now[0], "2027-01-15T08:00:05.500Z", whole=True) == (
        "2027-01-15T08:00:06.000Z"  # never before a fractional previous stamp
    )


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


def test_bulk_deletes_at_the_end_of_a_type_s_order_never_break_the_storm() -> None:
    """`micro_stamps`' bulk deletes took the rows from the type's live order and then read the
    first deleted id back from it: a run at the end of the order had shrunk it, an IndexError
    that ended a strict chaos test (CI, session 20). Every mutation of a long storm applies."""
    from sync.emulator.churn import mutate_randomly

    data = Dataset(resources=600, seed=3, hard=Hard(micro_stamps=True))
    done: list[tuple[str, str, str]] = []
    for seed in range(80):  # the storm that raised at its 55th step before the fix
        done += mutate_randomly(data, 100, seed)
    assert len(done) == 8000 and any(d[0] == "bulk_delete" for d in done)
