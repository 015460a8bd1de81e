"""The mall-scoped types through `GET /malls?include=` (`sync.jobs.malls.mallincludes`): detection, polls,
creations located without polling every mall, and the per-mall fallback, each leaving the
mirror exactly equal to the emulator."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sync.channel.client import ChannelClient
from sync.core.errors import BadResponseError, UpstreamError
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.evidence import Evidence
from sync.jobs.malls.mallincludes import INCLUDE, PER_MALL, MallIncludes, recorded, refused
from sync.model import catalogue
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.settings import settings_for

MALL_SCOPED = ["stores", "products", "programs", "social_feeds", "press_releases"]
TYPES = ["malls", *MALL_SCOPED]
MALLS = 20
PAGE = 5  # malls a request: 4 pages at 20 malls


@dataclass
class Rig:
    emu: Emulator
    db: Path
    mirror: Mirror
    client: ChannelClient
    members: MallIncludes

    def traffic(self) -> dict[str, int]:
        return dict(self.emu.requests.routes)


@asynccontextmanager
async def rig(make_emulator: Any, tmp_path: Path, *, served: bool) -> AsyncIterator[Rig]:
    """A backfilled mirror of the mall-scoped types and a `MallIncludes` over it."""
    async with make_emulator(resources=3000, malls=MALLS, seed=21) as emu:
        emu.app.mall_includes = served
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=TYPES, max_backoff=0.05, max_requests_per_second=0)
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream) as client:
                await Backfill(client, mirror, settings).run()
                types = [catalogue.TYPES[t] for t in TYPES]
                members = MallIncludes(
                    client,
                    mirror,
                    Evidence(client, mirror),
                    types,
                    lambda: list(mirror.table("malls").ids()),
                    page_size=PAGE,
                )
                yield Rig(emu, db, mirror, client, members)
        finally:
            mirror.close()


@pytest.mark.parametrize("served", [True, False])
async def test_detection_takes_the_fast_path_only_where_it_is_served(
    make_emulator: Any, tmp_path: Path, served: bool
) -> None:
    async with rig(make_emulator, tmp_path, served=served) as r:
        decisions = await r.members.detect()
        assert set(decisions) == set(MALL_SCOPED)
        modes = {d.mode for d in decisions.values()}
        assert modes == ({INCLUDE} if served else {PER_MALL})
        if not served:  # each type asked alone after the joint refusal: the reason says so
            assert all("answered 400" in d.reason for d in decisions.values())
        shown = recorded(r.mirror)
        assert shown is not None
        assert {n: d["mode"] for n, d in shown["types"].items()} == {
            n: d.mode for n, d in decisions.items()
        }


async def test_a_linkage_that_lacks_rows_the_mirror_holds_is_not_trusted(
    make_emulator: Any, tmp_path: Path
) -> None:
    """An upstream that caps or filters the included linkage would hide changes: detected."""
    async with rig(make_emulator, tmp_path, served=True) as r:
        page, _ = await r.client.list_members(["stores"], 1, size=PAGE)
        assert r.members._judge(page, "stores").mode == INCLUDE
        for mall in page.resources:
            data = mall["relationships"]["stores"]["data"]
            del data[len(data) // 2 :]  # half of each mall's stores left out
        decision = r.members._judge(page, "stores")
        assert decision.mode == PER_MALL and "lacks" in decision.reason


async def test_a_fast_path_poll_fetches_only_what_changed_and_mirrors_exactly(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with rig(make_emulator, tmp_path, served=True) as r:
        await r.members.detect()
        assert {t.name for t in r.members.fast()} == set(MALL_SCOPED)
        emu = r.emu
        malls = emu.ids("malls")
        changed_malls: set[str] = set()
        for name in ("stores", "products", "press_releases"):
            for rid in emu.ids(name)[:3]:
                emu.update(name, rid)
                changed_malls.add(emu.mall_of(name, rid) or "")
        created = emu.create("stores", {"name": "New on the fast path"}, mall_id=malls[-1])
        emu.create("programs", {"name": "A new program"}, mall_id=malls[0])
        emu.requests.reset()
        written = await r.members.poll()
        traffic = r.traffic()
        pages = math.ceil(len(malls) / PAGE)
        assert traffic.get("/malls", 0) == pages
        # Fetched by filter[id] per (type, mall) changed; no mall's listing walked.
        fetches = sum(n for route, n in traffic.items() if route.startswith("/malls/{id}/"))
        assert fetches <= 3 * 3 + 2
        assert sum(written.values()) >= 9 + 2
        assert r.mirror.table("stores").get(int(created)) is not None
        assert compare(r.db, emu, TYPES).differences == 0

        # Nothing changed since: every page answers 304 and nothing is fetched.
        emu.requests.reset()
        statuses: list[bool] = []
        original = r.client.list_members

        async def spy(*args: Any, **kwargs: Any) -> Any:
            page, etag = await original(*args, **kwargs)
            statuses.append(page.not_modified)
            return page, etag

        r.client.list_members = spy  # type: ignore[method-assign]
        assert sum((await r.members.poll()).values()) == 0
        assert statuses == [True] * pages
        assert set(r.traffic()) == {"/malls"}
        assert compare(r.db, emu, TYPES).differences == 0


async def test_creations_are_located_in_recently_active_malls_first(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with rig(make_emulator, tmp_path, served=True) as r:
        await r.members.detect()
        emu = r.emu
        malls = emu.ids("malls")
        hot = malls[-1]  # on the last page: found first only because it is hot
        r.members.touch(int(hot))
        new = int(emu.create("stores", {"name": "Hot mall's new store"}, mall_id=hot))
        emu.requests.reset()
        found = await r.members.locate(catalogue.TYPES["stores"], [new])
        assert found == {new}
        assert r.traffic() == {"/malls": 1, "/malls/{id}/stores": 1}
        assert r.mirror.table("stores").get(new) is not None

        # A mall nobody touched: pages in order, stopping at the one that names it.
        cold = malls[2 * PAGE]  # on page 3
        new2 = int(emu.create("stores", {"name": "Cold mall's new store"}, mall_id=cold))
        r.members.hot.clear()
        emu.requests.reset()
        assert await r.members.locate(catalogue.TYPES["stores"], [new2]) == {new2}
        assert r.traffic()["/malls"] <= 3
        assert compare(r.db, emu, TYPES).differences == 0

        # An id no mall names (gone again, or forged): every page once, nothing written.
        emu.requests.reset()
        assert await r.members.locate(catalogue.TYPES["stores"], [10**9]) == set()
        assert r.traffic()["/malls"] <= math.ceil(len(malls) / PAGE)


async def test_per_mall_locate_tries_recently_active_malls_by_filter_id(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with rig(make_emulator, tmp_path, served=False) as r:
        await r.members.detect()
        emu = r.emu
        mall = emu.ids("malls")[4]
        r.members.touch(int(mall))
        new = int(emu.create("products", {"name": "Found by filter[id]"}, mall_id=mall))
        emu.requests.reset()
        assert await r.members.locate(catalogue.TYPES["products"], [new]) == {new}
        assert r.traffic() == {"/malls/{id}/products": 1}
        assert compare(r.db, emu, TYPES).differences == 0


async def test_the_daemon_locates_webhook_creations_and_falls_back_when_refused(
    make_emulator: Any, tmp_path: Path
) -> None:
    """End to end: the daemon detects the fast path, a store created upstream reaches the
    mirror through its webhook at the cost of a page of malls and a fetch, and when the
    upstream stops serving the includes the next poll falls back to per-mall listings."""
    from tests.support.daemon import running
    from tests.support.settings import daemon_settings
    from tests.support.waiting import eventually

    async with make_emulator(resources=3000, malls=MALLS, seed=22) as emu:
        emu.app.mall_includes = True
        db = tmp_path / "m.db"
        base = daemon_settings(emu, db, webhooks=True)
        upstream = base.upstream.model_copy(update={"types": TYPES, "members_page_size": PAGE})
        settings = base.model_copy(update={"upstream": upstream})
        async with running(settings) as daemon:
            assert {t.name for t in daemon.bodies.members.fast()} == set(MALL_SCOPED)
            await eventually(lambda: emu.requests.routes.get("/malls", 0) > 0)
            mall = emu.ids("malls")[7]
            emu.requests.reset()
            new = int(emu.create("stores", {"name": "Announced by a webhook"}, mall_id=mall))
            await eventually(
                lambda: daemon.running.mirror.table("stores").get(new) is not None, timeout=10
            )
            routes = dict(emu.requests.routes)
            assert routes.get("/malls", 0) <= math.ceil(MALLS / PAGE)
            assert routes.get("/malls/{id}/stores", 0) == 1, routes

            emu.app.mall_includes = False
            emu.update("products", emu.ids("products")[0])
            await daemon.bodies.poll_all()
            assert daemon.bodies.members.fast() == []
            assert all("answered 400" in d.reason for d in daemon.bodies.members.decisions.values())
        assert compare(db, emu, TYPES).differences == 0
        shown = status_data(settings.mirror.path)["mall_members"][
            "types"
        ]  # what `ccsync status` prints
        assert {n: d["mode"] for n, d in shown.items()} == dict.fromkeys(MALL_SCOPED, PER_MALL)


def test_only_a_refusal_or_an_off_spec_answer_changes_the_path() -> None:
    """A 4xx (not 401/429) or an off-spec body falls back to per-mall listings; a 5xx, a 429,
    a 401 or a network failure is transient and changes no decision."""
    assert refused(UpstreamError("no", status=400))
    assert refused(UpstreamError("no", status=422))
    assert refused(BadResponseError("linkage id 'x' is not an integer", status=200))
    for status in (None, 401, 429, 500, 503):
        assert not refused(UpstreamError("later", status=status))
