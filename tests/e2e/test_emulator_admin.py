"""The emulator as a thing run and steered: request faults, the page cache, `ccsync emulator`, and
the `/_emulator/` routes that change a running emulator from outside its process
(`sync.emulator.middleware`, `sync.emulator.pagecache`, `sync.emulator.admin`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from sync.emulator import Emulator
from tests.support.emulator_client import Signed, valid
from tests.support.paths import ROOT

# -- faults --------------------------------------------------------------------------------------


async def test_request_faults(api: Signed, emulator: Emulator) -> None:
    f = emulator.faults
    f.error_rate = 1.0
    status, _, doc = await api.get("/malls")
    assert status in (500, 502, 503)
    valid(doc)
    f.error_rate, f.rate_429, f.retry_after = 0, 1.0, 3
    status, headers, _ = await api.get("/malls")
    assert status == 429 and headers["Retry-After"] == "3"
    f.rate_429, f.drop_rate = 0, 1.0
    with pytest.raises(aiohttp.ClientError):
        await api.get("/malls")
    f.drop_rate, f.latency = 0, 0.05
    assert (await api.get("/malls"))[0] == 200
    await api.login()  # login is never faulted
    f.off()
    assert (
        f.injected["http_5xx"] == 1 and f.injected["http_429"] == 1 and f.injected["dropped"] >= 1
    )


# -- the page cache ------------------------------------------------------------------------------


async def test_page_cache_reuses_bodies_until_the_data_changes(
    make_emulator: Callable[..., contextlib.AbstractAsyncContextManager[Emulator]],
) -> None:
    query = {"include": "images,tags", "page[size]": "20", "sort": "id"}
    async with make_emulator(resources=300, seed=7, page_cache_mb=16) as emu:
        cache = emu.app.pages
        async with aiohttp.ClientSession() as http:
            api = Signed(http, emu.base_url, emu.email, emu.password)
            await api.login()
            _, _, first = await api.get("/deals", query)
            _, headers, again = await api.get("/deals", query)
            assert again == first and (cache.hits, cache.misses) == (1, 1)
            valid(again)
            # ETags still hold for a cached body.
            assert (await api.get("/deals", query, headers={"If-None-Match": headers["ETag"]}))[
                0
            ] == 304
            # Auth is checked before the cache: a cached page is no open door.
            assert (await api.get("/deals", query, auth=False))[0] == 401
            # A change to an included resource changes the page of another type.
            image = next(r["id"] for r in first["included"] if r["type"] == "images")
            emu.update("images", int(image))
            _, _, changed = await api.get("/deals", query)
            assert changed != first
            cache.budget = 0  # off: assembled anew, the same document
            assert (await api.get("/deals", query))[2] == changed
            # Faults apply to every request, cached or not.
            cache.budget = 16 << 20
            emu.faults.error_rate = 1.0
            assert (await api.get("/deals", query))[0] in (500, 502, 503)


async def test_page_cache_stops_at_its_budget(
    make_emulator: Callable[..., contextlib.AbstractAsyncContextManager[Emulator]],
) -> None:
    async with make_emulator(resources=300, seed=7, page_cache_mb=1) as emu:
        cache = emu.app.pages
        async with aiohttp.ClientSession() as http:
            api = Signed(http, emu.base_url, emu.email, emu.password)
            await api.login()
            _, _, doc = await api.get("/deals", {"include": "images,tags", "page[size]": "100"})
            size = cache.used
            assert size > 0 and len(cache) == 1
            cache.budget = size + 1  # room for no second page
            await api.get("/deals", {"include": "images,tags", "page[size]": "99"})
            assert len(cache) == 1 and cache.used == size
            assert (await api.get("/deals", {"include": "images,tags", "page[size]": "100"}))[
                2
            ] == doc


# -- the command ---------------------------------------------------------------------------------


async def test_cli_serves_prints_and_stops_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sync",
        "emulator",
        "--resources",
        "300",
        "--port",
        "0",
        "--page-cache-mb",
        "8",
        cwd=ROOT,
        env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    base = line.strip().rsplit(" ", 1)[1]
    creds = (await proc.stdout.readline()).decode()
    assert "email=demo@example.com" in creds and "password=demo-password" in creds
    async with aiohttp.ClientSession() as http:
        client = Signed(http, base, "demo@example.com", "demo-password")
        await client.login()
        assert (await client.get("/malls"))[0] == 200
        assert (await client.get("/malls"))[0] == 200  # the second from the page cache
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 15) == 0
    rest = (await proc.stdout.read()).decode()
    assert "page cache: 1 pages" in rest and "1 hits, 1 misses" in rest, rest


async def test_a_running_emulator_is_changed_from_outside_its_process(make_emulator: Any) -> None:
    """`/_emulator/resources/...`: create, update (also silently) and delete a chosen row over
    HTTP, with the notices, stamps and deletions feed of any mutation; clear errors."""
    import aiohttp

    async with make_emulator(resources=200, seed=5) as emu:
        base = f"{emu.base_url}/_emulator/resources"
        deal = emu.ids("deals")[0]
        before = emu.snapshot("deals")[deal]["updated_at"]
        async with aiohttp.ClientSession() as http:
            async with http.patch(
                f"{base}/deals/{deal}", json={"attributes": {"title": "Edited"}}
            ) as r:
                assert r.status == 200
                doc = await r.json()
            assert doc["data"]["attributes"]["title"] == "Edited"
            assert emu.snapshot("deals")[deal]["updated_at"] > before
            stamp = emu.snapshot("deals")[deal]["updated_at"]
            async with http.patch(
                f"{base}/deals/{deal}", json={"attributes": {"title": "Quiet"}, "silent": True}
            ) as r:
                assert r.status == 200
            assert emu.snapshot("deals")[deal] == {**emu.snapshot("deals")[deal], "title": "Quiet"}
            assert emu.snapshot("deals")[deal]["updated_at"] == stamp
            mall = emu.ids("malls")[0]
            async with http.post(
                f"{base}/stores", json={"attributes": {"name": "New Store"}, "mall_id": int(mall)}
            ) as r:
                assert r.status == 201
                new = (await r.json())["data"]["id"]
            assert emu.snapshot("stores")[new]["name"] == "New Store"
            assert emu.mall_of("stores", new) == mall
            async with http.delete(f"{base}/stores/{new}") as r:
                assert r.status == 204
            assert new not in emu.snapshot("stores")
            assert any(
                a["resource_id"] == int(new) and a["resource_type"] == "stores"
                for a in emu.snapshot("deletions").values()
            )
            for method, url, body, status in (
                ("PATCH", f"{base}/deals/999999", {}, 404),
                ("POST", f"{base}/spaceships", {}, 404),
                ("PATCH", f"{base}/deals/{deal}", {"attributes": 3}, 400),
                ("POST", f"{base}/stores", {"mall_id": 999999}, 422),
            ):
                async with http.request(method, url, json=body) as r:
                    assert r.status == status, (method, url, await r.text())
