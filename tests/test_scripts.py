"""`meta.scripts` mirrored exactly: per resource type, in order, a script no longer served gone."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from sync import catalogue
from sync.channel.client import ChannelClient
from sync.emulator import Emulator
from tests.backfilled import settings_for

DEALS = catalogue.TYPES["deals"]
ARTICLES = catalogue.TYPES["articles"]
C = {"type": "text/javascript", "content": "c()"}


async def test_emulator_serves_per_type_scripts_on_the_switch(emulator: Emulator) -> None:
    """Off: one list for every type. On: each type its own; `PUT /_emulator/scripts/{type}`
    changes one type's from the next response on, the others untouched."""
    same = emulator.scripts("deals")
    assert all(emulator.scripts(t) == same for t in catalogue.LISTABLE)
    async with aiohttp.ClientSession() as http:
        base = f"{emulator.base_url}/_emulator"
        async with http.patch(f"{base}/settings", json={"changing_scripts": True}) as resp:
            assert (await resp.json())["changing_scripts"] is True
        lists = [emulator.scripts(t) for t in catalogue.LISTABLE]
        assert len({repr(x) for x in lists}) == len(lists)
        async with http.put(f"{base}/scripts/deals", json=[C]) as resp:
            assert resp.status == 200 and await resp.json() == [C]
    settings = settings_for(emulator, Path("unused.db"))
    async with ChannelClient(settings.upstream) as client:
        deals = await client.list_page(DEALS, 1, scope_params={"filter[visibility]": "Public"})
        articles = await client.list_page(ARTICLES, 1)
    assert deals.meta["scripts"] == [C]
    assert articles.meta["scripts"] == emulator.scripts("articles") != [C]
