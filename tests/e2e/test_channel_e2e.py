"""The upstream client against the bundled emulator over real HTTP on 127.0.0.1: login, every
listable type, paging, fetch by id, re-login after a forced logout, retries through injected
faults, clock skew, hours, webhooks. Waits between retries are faked so faults cost no time."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta
from typing import Any

import pytest

from sync.channel.client import ChannelClient
from sync.channel.listing import Listing
from sync.core.config import parse_config
from sync.core.errors import NotFoundError
from sync.emulator import Emulator
from sync.model import catalogue
from sync.model.scopes import Scope

DEALS = catalogue.TYPES["deals"]
PUBLIC = {"filter[visibility]": "Public"}


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def client_for(emu: Emulator, **upstream: Any) -> ChannelClient:
    settings = parse_config(
        {
            "upstream": {
                "base_url": emu.base_url,
                "email": emu.email,
                "password": emu.password,
                **upstream,
            }
        }
    )
    return ChannelClient(settings.upstream, sleep=no_wait)


async def test_first_page_of_every_listable_type(emulator: Emulator) -> None:
    mall_id = emulator.ids("malls")[0]
    async with client_for(emulator, page_size=5) as c:
        await c.session.login()
        for name in catalogue.LISTABLE:
            rtype = catalogue.TYPES[name]
            mall = mall_id if rtype.level == "mall" else None
            page = await c.list_page(Scope(rtype, mall, rtype.scope_params[0]), 1)
            expected = emulator.ids(name, mall_id=mall)
            if name == "deals":
                expected = emulator.ids(name, visibility="Public")
            assert page.number == 1 and page.last == max(1, -(-len(expected) // 5)), name
            assert [r["id"] for r in page.resources] == sorted(expected, key=int)[:5], name
            assert all(r["type"] == name for r in page.resources), name
            assert isinstance(page.meta.get("scripts"), list), name
        assert c.session.api_version is not None and c.session.api_version.startswith("v")


async def test_iter_pages_collects_exactly_the_public_deals(emulator: Emulator) -> None:
    async with client_for(emulator, page_size=7) as c:
        pages = [p async for p in c.iter_pages(Scope(DEALS, None, PUBLIC))]
    ids = [r["id"] for p in pages for r in p.resources]
    assert ids == sorted(emulator.ids("deals", visibility="Public"), key=int)
    assert len(ids) == len(set(ids)) and [p.number for p in pages] == list(
        range(1, pages[0].last + 1)
    )
    sideloaded = {(i["type"], i["id"]) for p in pages for i in p.included}
    assert sideloaded and {t for t, _ in sideloaded} <= {"images", "tags", "stores"}


async def test_sparse_fields_and_updated_at_sort(emulator: Emulator) -> None:
    async with client_for(emulator) as c:
        page = await c.list_page(
            Listing(Scope(DEALS, None, PUBLIC), {"sort": "updated_at"}, ["updated_at"]), 1
        )
    stamps = [r["attributes"]["updated_at"] for r in page.resources]
    assert stamps == sorted(stamps)
    assert all(set(r["attributes"]) == {"updated_at"} for r in page.resources)


async def test_fetch_ids(emulator: Emulator) -> None:
    wanted = emulator.ids("deals", visibility="Public")[:3]
    async with client_for(emulator) as c:
        page = await c.fetch_ids(Scope(DEALS, None, PUBLIC), wanted)
        with pytest.raises(NotFoundError):
            await c.session.get_document("/deals/999999999", {})
    assert sorted(r["id"] for r in page.resources) == sorted(wanted)


async def test_relogin_after_a_forced_logout(emulator: Emulator) -> None:
    async with client_for(emulator) as c:
        first = await c.list_page(Scope(DEALS, None, PUBLIC), 1)
        emulator.force_logout()
        again = await c.list_page(Scope(DEALS, None, PUBLIC), 1)
        assert c.session.stats.relogins == 1 and c.session.stats.statuses[401] == 1
    assert [r["id"] for r in first.resources] == [r["id"] for r in again.resources]


async def test_retries_through_injected_faults(emulator: Emulator) -> None:
    emulator.faults.error_rate = 0.3
    emulator.faults.drop_rate = 0.05
    emulator.faults.rate_429 = 0.05
    async with client_for(emulator, page_size=10) as c:
        ids = [r["id"] async for p in c.iter_pages(Scope(DEALS, None, PUBLIC)) for r in p.resources]
        assert c.session.stats.retries > 0
    assert ids == sorted(emulator.ids("deals", visibility="Public"), key=int)
    assert emulator.faults.injected.get("http_5xx", 0) > 0


async def test_clock_skew_is_corrected_from_the_date_header(emulator: Emulator) -> None:
    emulator.faults.clock_offset = 600.0  # the upstream runs ten minutes ahead
    async with client_for(emulator) as c:
        page = await c.list_page(Scope(DEALS, None, PUBLIC), 1)
        assert c.session.clock_offset == pytest.approx(600, abs=2)
        assert c.session.stats.statuses[401] == 0
    assert page.resources


async def test_hours_and_current_hours(emulator: Emulator) -> None:
    mall_id = emulator.ids("malls")[0]
    start = date.today()
    async with client_for(emulator) as c:
        hours = await c.hours(mall_id, start, start + timedelta(days=6))
        current = await c.current_hours(mall_id)
    assert [h["id"] for h in hours] == [(start + timedelta(days=i)).isoformat() for i in range(7)]
    assert all(h["type"] == "hours" for h in hours)
    assert current is not None


async def test_webhook_subscribe_list_unsubscribe(emulator: Emulator) -> None:
    async with client_for(emulator) as c:
        sub = await c.webhooks.subscribe("http://127.0.0.1:9/hook", "deals")
        assert [h["id"] for h in await c.webhooks.list_all()] == [sub["id"]]
        await c.webhooks.unsubscribe(sub["id"])
        assert await c.webhooks.list_all() == []
