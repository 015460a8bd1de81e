"""The press release listing of the management API: asked for in ascending id order, and pruned
only of rows a page proves gone, against an emulator that honours `sort_by[]`, refuses what it
does not know, shifts the list mid-walk or ignores the order on a switch."""

from __future__ import annotations

from typing import Any

import aiohttp
from structlog.testing import capture_logs

from sync.core.config import ManagementSettings, parse_config
from sync.emulator import Emulator
from sync.management.client import ManagementClient
from sync.management.press import mirror_press_releases
from sync.management.walk import Walk
from sync.store import Mirror
from sync.store.press import PressReleases


def settings(emu: Emulator) -> ManagementSettings:
    s = parse_config(
        {
            "upstream": {"base_url": emu.base_url, "email": "a@b.c", "password": "x"},
            "management": {
                "base_url": emu.base_url,
                "product": "loyalty",
                "loyalty_club": "demo-club",
                "bearer_token": emu.management.token,
                "locales": ["en"],
                "per_page": 25,
            },
        }
    ).management
    assert s is not None
    return s


def ids(mirror: Mirror) -> set[int]:
    return {r[0] for r in mirror.conn.execute("select id from mgmt_press_releases")}


async def run(emu: Emulator, mirror: Mirror) -> tuple[int, int]:
    async with ManagementClient(settings(emu)) as client:
        return (await mirror_press_releases(client, PressReleases(mirror.conn), ["en"]))["en"]


async def listing(emu: Emulator, **params: Any) -> tuple[int, Any]:
    s = settings(emu)
    headers = {
        "Authorization": f"Bearer {emu.management.token}",
        "X-User-Agent": "t",
        "X-Product-Name": s.product,
        "X-Loyalty-Club-Slug": s.loyalty_club,
        "X-Locale": "en",
    }
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{emu.base_url}/v1/content/press_releases", params=params, headers=headers) as r,
    ):
        return r.status, await r.json()


async def test_the_emulator_honours_sort_by_and_refuses_what_it_does_not_know(
    emulator: Emulator,
) -> None:
    status, doc = await listing(emulator, per_page="100")
    newest_first = [p["id"] for p in doc["press_releases"]]
    assert status == 200 and newest_first == sorted(newest_first, reverse=True)
    status, doc = await listing(
        emulator, **{"sort_by[]": "id", "sort_directions[]": "asc", "per_page": "100"}
    )
    ascending = [p["id"] for p in doc["press_releases"]]
    assert status == 200 and ascending == sorted(ascending) and ascending[0] == 1
    for bad, field in (
        ({"sort_by[]": "colour"}, "sort_by"),
        ({"sort_by[]": "id", "sort_directions[]": "up"}, "sort_directions"),
        ({"sort_directions[]": "asc"}, "sort_directions"),
    ):
        status, doc = await listing(emulator, **bad)
        assert status == 422 and doc["error"] == "Invalid parameters"
        assert field in doc["details"]


async def test_the_client_asks_for_ascending_ids(emulator: Emulator) -> None:
    async with ManagementClient(settings(emulator)) as client:
        seen = [p["id"] async for page in client.press_releases("en") for p in page]
    assert seen == sorted(emulator.management.press)


async def test_a_list_shifting_mid_walk_never_prunes_the_row_it_skipped(
    emulator: Emulator, mirror: Mirror
) -> None:
    everything = set(emulator.management.press)
    assert await run(emulator, mirror) == (len(everything), 0)
    # Before page 2 is served the first row goes and a backdated one comes: the total stays
    # the same and every later row moves one place left, so page 2 no longer starts where
    # page 1 ended.
    emulator.management.shift_at_page = 2
    await run(emulator, mirror)
    assert emulator.management.shift_at_page is None  # the shift happened
    upstream = set(emulator.management.press)
    assert ids(mirror) >= upstream  # nothing that exists was pruned
    assert ids(mirror) == upstream | everything
    # The next, quiet run proves the removed row gone (page 1 now starts after it).
    await run(emulator, mirror)
    assert ids(mirror) == upstream


async def test_a_row_gone_at_a_page_boundary_is_still_pruned(
    emulator: Emulator, mirror: Mirror
) -> None:
    await run(emulator, mirror)
    del emulator.management.press[26]  # the first row of page 2: a gap between two pages
    rows, removed = await run(emulator, mirror)
    assert (rows, removed) == (len(emulator.management.press), 1)
    assert 26 not in ids(mirror)


async def test_a_listing_out_of_the_asked_order_prunes_nothing(
    emulator: Emulator, mirror: Mirror
) -> None:
    await run(emulator, mirror)
    emulator.management.ignore_sort = True
    del emulator.management.press[5]
    with capture_logs() as logs:
        assert (await run(emulator, mirror))[1] == 0
    assert 5 in ids(mirror)
    deferred = [e for e in logs if e["event"] == "press_releases_prune_deferred"]
    assert deferred and deferred[0]["kept"] == 1
    assert "order" in deferred[0]["reason"]
    emulator.management.ignore_sort = False
    assert (await run(emulator, mirror))[1] == 1
    assert 5 not in ids(mirror)


def test_what_a_walk_proves() -> None:
    walk = Walk()
    walk.add([1, 2, 4], offset=0, first=True, last=False)
    walk.add([6, 7], offset=3, first=False, last=True)
    assert walk.ordered
    assert walk.proves_absent(3) and walk.proves_absent(0) and walk.proves_absent(9)
    assert not walk.proves_absent(5)  # between two pages: may have been skipped
    assert walk.boundary_of(5) == 3
    shuffled = Walk()
    shuffled.add([9, 8], offset=0, first=True, last=False)
    assert not shuffled.ordered
    behind = Walk()
    behind.add([5, 6], offset=0, first=True, last=False)
    behind.add([2, 3], offset=2, first=False, last=True)
    assert not behind.ordered
    repeated = Walk()  # a row added before page 2 was served: 3 comes twice, the order holds
    repeated.add([1, 2, 3], offset=0, first=True, last=False)
    repeated.add([3, 4, 5], offset=3, first=False, last=True)
    assert repeated.ordered and not repeated.boundaries
