"""The bundled emulator over real HTTP: routes, JSON:API query features, headers, auth, mutations,
webhooks, faults and the CLI, and every document valid against the JSON:API 1.0 schema."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp import web

from sync.emulator import Emulator
from tests.support.emulator_client import JSONAPI, Signed, signed, valid
from tests.support.processes import spawn
from tests.support.waiting import eventually


@pytest.fixture
async def api(emulator: Emulator) -> AsyncIterator[Signed]:
    async with signed(emulator) as client:
        yield client


# -- routes --------------------------------------------------------------------------------------

TOP = [
    "articles",
    "contacts",
    "deals",
    "events",
    "ifeatures",
    "job-listings",
    "mall-messages",
    "malls",
]
MALL = [
    "events",
    "mall-messages",
    "contacts",
    "ifeatures",
    "job-listings",
    "press-releases",
    "programs",
    "deals",
    "products",
    "social-feeds",
    "stores",
]


@pytest.mark.parametrize("path", TOP)
async def test_top_level_collections_and_singles(api: Signed, path: str) -> None:
    status, headers, doc = await api.get(f"/{path}", {"page[size]": "5", "page[number]": "1"})
    assert status == 200, doc
    valid(doc)
    assert headers["Content-Type"] == "application/vnd.api+json; charset=utf-8"
    assert doc["meta"]["scripts"] and {"type", "content"} <= set(doc["meta"]["scripts"][0])
    assert 1 <= len(doc["data"]) <= 5
    first = doc["data"][0]
    assert first["links"]["self"].endswith(f"/{path}/{first['id']}")
    for name, rel in first.get("relationships", {}).items():
        assert "_" not in rel["links"]["related"].rsplit("/", 1)[1], name  # hyphenated paths
    status, _, single = await api.get(f"/{path}/{first['id']}")
    assert status == 200 and single["data"]["id"] == first["id"]
    valid(single)
    status, _, err = await api.get(f"/{path}/99999999")
    assert status == 404
    valid(err)


@pytest.mark.parametrize("sub", MALL)
async def test_nested_mall_routes(api: Signed, emulator: Emulator, sub: str) -> None:
    mall = emulator.ids("malls")[0]
    status, _, doc = await api.get(f"/malls/{mall}/{sub}", {"page[size]": "100"})
    assert status == 200
    valid(doc)
    type_name = sub.replace("-", "_")
    visibility = "Public" if type_name == "deals" else None
    expected = (
        emulator.ids(type_name, mall_id=mall, visibility=visibility)
        if type_name != "deals"
        else None
    )
    if expected is not None:
        assert [d["id"] for d in doc["data"]] == expected[:100]
    assert (await api.get(f"/malls/999999/{sub}"))[0] == 404


@pytest.mark.parametrize(
    ("owner", "rels"),
    [
        ("articles", ["images", "malls", "products", "tags"]),
        ("deals", ["stores", "images", "tags"]),
        ("events", ["groups", "images"]),
        ("ifeatures", ["mall"]),
        ("job-listings", ["images", "store"]),
        ("mall-messages", ["mall"]),
    ],
)
async def test_related_routes(api: Signed, emulator: Emulator, owner: str, rels: list[str]) -> None:
    rid = emulator.ids(owner.replace("-", "_"))[0]
    for rel in rels:
        status, _, doc = await api.get(f"/{owner}/{rid}/{rel}")
        assert status == 200, (owner, rel, doc)
        valid(doc)
        if rel in ("mall", "store"):
            assert doc["data"] is None or doc["data"]["type"] in ("malls", "stores")
        else:
            assert isinstance(doc["data"], list)


async def test_hours_and_current_hours(api: Signed, emulator: Emulator) -> None:
    mall = emulator.ids("malls")[0]
    status, headers, doc = await api.get(
        f"/malls/{mall}/hours", {"from": "2026-11-01", "to": "2026-11-07"}
    )
    assert status == 200
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert [h["id"] for h in doc["data"]] == [f"2026-11-0{d}" for d in range(1, 8)]
    assert set(doc) == {"data"} and "links" not in doc["data"][0]
    assert doc["data"][0]["attributes"]["day"] == "Sunday"
    assert (await api.get(f"/malls/{mall}/hours", {"from": "nope"}))[0] == 400
    status, headers, cur = await api.get(f"/malls/{mall}/current-hours")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert {"is_open", "opens_at", "closes_at", "date"} <= set(cur["data"])


async def test_unknown_route_is_a_jsonapi_404(api: Signed) -> None:
    status, _, doc = await api.get("/spaceships")
    assert status == 404 and doc["errors"][0]["status"] == "404"
    valid(doc)


# -- query features --------------------------------------------------------------------------------


async def test_include_gives_linkage_and_deduplicated_included(api: Signed) -> None:
    status, _, doc = await api.get("/deals", {"include": "images,tags", "page[size]": "50"})
    assert status == 200
    valid(doc)
    keys = [(r["type"], r["id"]) for r in doc["included"]]
    assert len(keys) == len(set(keys))
    linked = {
        (d["type"], d["id"]) for r in doc["data"] for d in r["relationships"]["images"]["data"]
    }
    assert linked <= set(keys)
    assert "data" not in doc["data"][0]["relationships"]["stores"]
    assert (await api.get("/deals", {"include": "spaceships"}))[0] == 400


async def test_sparse_fieldsets(api: Signed) -> None:
    _, _, doc = await api.get(
        "/deals", {"fields[deals]": "updated_at", "include": "images", "fields[images]": "url"}
    )
    valid(doc)
    assert set(doc["data"][0]["attributes"]) == {"updated_at"}
    assert all(set(i["attributes"]) <= {"url"} for i in doc["included"])


async def test_sparse_fieldset_variants_are_cached_apart_and_follow_updates(
    api: Signed, emulator: Emulator
) -> None:
    new = emulator.create("articles", {"title": "Hello"})
    path = f"/articles/{new}"
    for _ in range(2):  # the second answer of each variant comes from the cache
        _, _, doc = await api.get(path, {"fields[articles]": "title"})
        assert doc["data"]["attributes"] == {"title": "Hello"}
        _, _, doc = await api.get(path, {"fields[articles]": "updated_at"})
        assert set(doc["data"]["attributes"]) == {"updated_at"}
        _, _, doc = await api.get(path)
        assert doc["data"]["attributes"]["title"] == "Hello"
    emulator.update("articles", new, {"title": "Again"})
    _, _, doc = await api.get(path, {"fields[articles]": "title"})
    assert doc["data"]["attributes"] == {"title": "Again"}


async def test_filter_id_and_visibility(api: Signed, emulator: Emulator) -> None:
    public = emulator.ids("deals", visibility="Public")
    unlisted = emulator.ids("deals", visibility="Unlisted")
    _, _, doc = await api.get(
        "/deals", {"filter[id]": f"{public[0]},{unlisted[0]}", "page[size]": "100"}
    )
    assert [d["id"] for d in doc["data"]] == [public[0]]  # default visibility is Public
    _, _, doc = await api.get(
        "/deals", {"filter[id]": unlisted[0], "filter[visibility]": "Unlisted"}
    )
    assert [d["id"] for d in doc["data"]] == [unlisted[0]]
    _, _, doc = await api.get(
        "/deals", {"filter[visibility]": "Public,Unlisted,Private", "page[size]": "100"}
    )
    assert len(doc["data"]) == min(100, len(emulator.ids("deals")))
    store = emulator.ids("stores")[0]
    mall = emulator.mall_of("stores", store)
    _, _, doc = await api.get(f"/malls/{mall}/stores", {"filter[id]": store})
    assert [d["id"] for d in doc["data"]] == [store]
    assert (await api.get("/deals", {"filter[id]": "x"}))[0] == 400


async def test_date_filters_both_formats_and_sort(api: Signed, emulator: Emulator) -> None:
    snap = emulator.snapshot("articles")
    stamps = sorted(a["updated_at"] for a in snap.values())
    middle = stamps[len(stamps) // 2]
    _, _, doc = await api.get(
        "/articles", {"filter[updated_at][gte]": middle, "page[size]": "100", "sort": "updated_at"}
    )
    got = [d["attributes"]["updated_at"] for d in doc["data"]]
    assert (
        got == sorted(got)
        and got[0] == middle
        and len(got) == min(100, len(stamps) - len(stamps) // 2)
    )
    day = middle[:10]
    _, _, doc = await api.get("/articles", {"filter[updated_at][lt]": day, "page[size]": "100"})
    assert all(d["attributes"]["updated_at"] < day for d in doc["data"])
    _, _, doc = await api.get(
        "/articles",
        {"filter[display_at][gt]": "2026-06-01", "page[size]": "100", "sort": "-display_at"},
    )
    shown = [d["attributes"]["display_at"] for d in doc["data"]]
    assert shown == sorted(shown, reverse=True) and all(s > "2026-06-01" for s in shown)
    _, _, doc = await api.get("/articles", {"sort": "-id", "page[size]": "3"})
    assert [d["id"] for d in doc["data"]] == sorted(
        emulator.ids("articles"), key=int, reverse=True
    )[:3]
    assert (await api.get("/articles", {"filter[updated_at][gte]": "yesterday"}))[0] == 400
    assert (await api.get("/articles", {"filter[color]": "red"}))[0] == 400


async def test_boolean_and_name_filters(api: Signed, emulator: Emulator) -> None:
    _, _, doc = await api.get("/events", {"filter[is_active]": "true", "page[size]": "100"})
    assert doc["data"] and all(d["attributes"]["is_active"] is True for d in doc["data"])
    name = next(iter(emulator.snapshot("malls").values()))["name"]
    _, _, doc = await api.get("/malls", {"filter[name]": name})
    assert doc["data"] and all(d["attributes"]["name"] == name for d in doc["data"])


async def test_paging_and_links(api: Signed, emulator: Emulator) -> None:
    _, _, doc = await api.get("/articles")
    assert len(doc["data"]) == min(25, len(emulator.ids("articles")))  # default page size
    _, _, doc = await api.get(
        "/articles",
        {"page[size]": "7", "page[number]": "2", "filter[updated_at][gte]": "2024-01-01"},
    )
    last = doc["links"]["last"]
    q = parse_qs(urlsplit(last).query)
    assert last.startswith("http://127.0.0.1:")
    assert q["page[size]"] == ["7"] and q["filter[updated_at][gte]"] == ["2024-01-01"]
    assert not any(k.startswith("auth_") for k in q)
    n = int(q["page[number]"][0])
    assert n == -(-len(emulator.ids("articles")) // 7)
    _, _, beyond = await api.get("/articles", {"page[size]": "7", "page[number]": str(n + 5)})
    assert beyond["data"] == []
    for bad in ("0", "101", "x"):
        status, _, err = await api.get("/articles", {"page[size]": bad})
        assert status == 400 and err["errors"][0]["source"]["parameter"] == "page[size]"
        valid(err)


async def test_meta_and_attributes_of_the_spec(api: Signed) -> None:
    _, _, doc = await api.get("/job-listings", {"page[size]": "3"})
    assert "salary" in doc["data"][0]["meta"]["deprecated_fields"]
    _, _, doc = await api.get("/deals", {"include": "images", "page[size]": "50"})
    image = doc["included"][0]["attributes"]
    assert image["size_parameter"] in image["url"]


# -- headers -------------------------------------------------------------------------------------


async def test_headers_and_etag(api: Signed) -> None:
    status, headers, _ = await api.get("/malls")
    assert headers["X-API-Version"].startswith("v12.")
    assert headers["Cache-Control"] == "max-age=0, private, must-revalidate"
    assert (
        headers["Vary"] == "Origin" and headers["X-Request-Id"] and float(headers["X-Runtime"]) >= 0
    )
    etag = headers["ETag"]
    assert etag.startswith('W/"')
    status, _, body = await api.get("/malls", headers={"If-None-Match": etag})
    assert status == 304 and body is None


# -- auth ----------------------------------------------------------------------------------------


async def test_accounts_login_logout(emulator: Emulator) -> None:
    async with aiohttp.ClientSession() as http:
        base = emulator.base_url
        body = {
            "data": {
                "type": "accounts",
                "attributes": {"email": "new@example.com", "password": "pw-123456"},
            }
        }
        async with http.post(f"{base}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 201 and r.content_type == "application/json"
        async with http.post(f"{base}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 422
        client = Signed(http, base, "new@example.com", "pw-123456")
        first = (await client.login())["data"]["attributes"]["authentication_token"]
        assert (await client.login())["data"]["attributes"]["authentication_token"] == first
        assert (await client.get("/malls"))[0] == 200
        status, headers = await client.logout()
        assert status == 204
        assert "httponly" in headers["Set-Cookie"].lower()
        assert (await client.get("/malls"))[0] == 401
        assert (await client.login())["data"]["attributes"]["authentication_token"] != first
        bad = {
            "data": {
                "type": "accounts",
                "attributes": {"email": "new@example.com", "password": "wrong"},
            }
        }
        async with http.post(f"{base}/accounts/login", json=bad, headers=JSONAPI) as r:
            assert r.status == 401


async def test_logout_takes_the_specs_body_and_ends_every_session_of_the_token(
    emulator: Emulator,
) -> None:
    async with aiohttp.ClientSession() as http:
        one = Signed(http, emulator.base_url, emulator.email, emulator.password)
        two = Signed(http, emulator.base_url, emulator.email, emulator.password)
        await one.login()
        await two.login()
        assert one.token == two.token  # one token, two sessions
        url = f"{emulator.base_url}/accounts/logout"
        # the signature in the query and no body is not the spec's logout
        async with http.delete(url, params=one.auth()) as r:
            assert r.status == 400
            valid(await r.json(content_type=None))
        for broken, status in (
            ({k: v for k, v in one.logout_body().items() if k != "format"}, 400),
            ({**one.logout_body(), "account": "me"}, 400),
            ({**one.logout_body(), "account": {"email": "someone@else.example"}}, 401),
            ({**one.logout_body(), "auth_token": "0" * 32}, 401),
        ):
            async with http.delete(url, json=broken) as r:
                assert r.status == status, broken
        assert (await two.get("/malls"))[0] == 200  # nothing ended yet
        async with http.delete(url, json=one.logout_body()) as r:
            assert r.status == 204 and await r.read() == b""
            cookie = r.cookies["_session_id"]
            assert cookie["httponly"] and cookie["path"] == "/"
        assert (await one.get("/malls"))[0] == 401
        assert (await two.get("/malls"))[0] == 401  # the other session of that token too
        await two.login()
        assert two.token != one.token and (await two.get("/malls"))[0] == 200


async def test_signature_failures(api: Signed, emulator: Emulator) -> None:
    assert (await api.get("/malls", auth=False))[0] == 401
    import time

    for params in (
        api.auth(int(time.time()) - 120),  # stale
        {**api.auth(), "auth_token": "not-md5"},  # malformed
        {**api.auth(), "auth_timestamp": "12345"},  # not 10 digits
        {k: v for k, v in api.auth().items() if k != "auth_id"},  # missing
    ):
        async with api.http.get(f"{api.base}/malls", params=params) as r:
            assert r.status == 401
            valid(await r.json(content_type=None))
    emulator.force_logout()
    assert (await api.get("/malls"))[0] == 401


async def test_clock_offset_outside_the_skew_window(api: Signed, emulator: Emulator) -> None:
    emulator.faults.clock_offset = 120
    status, headers, _ = await api.get("/malls")
    assert status == 401
    import time
    from email.utils import parsedate_to_datetime

    api.offset = parsedate_to_datetime(headers["Date"]).timestamp() - time.time()
    assert (await api.get("/malls"))[0] == 200


async def test_channels_restrict_routes(emulator: Emulator) -> None:
    async with aiohttp.ClientSession() as http:
        body = {
            "data": {
                "type": "accounts",
                "attributes": {
                    "email": "deal@example.com",
                    "password": "pw-1",
                    "properties": {"channels": ["deal"]},
                },
            }
        }
        async with http.post(f"{emulator.base_url}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 201
        client = Signed(http, emulator.base_url, "deal@example.com", "pw-1")
        await client.login()
        status, _, doc = await client.get("/articles")
        assert status == 403
        valid(doc)
        assert (await client.get("/deals"))[0] == 200
        assert (await client.get("/malls"))[0] == 200


# -- mutations -----------------------------------------------------------------------------------


async def test_mutations_show_over_http(api: Signed, emulator: Emulator) -> None:
    new = emulator.create("articles", {"title": "Hello"})
    _, _, doc = await api.get(f"/articles/{new}")
    assert doc["data"]["attributes"]["title"] == "Hello"
    before = doc["data"]["attributes"]["updated_at"]
    emulator.update("articles", new, {"title": "Again"})
    emulator.update("articles", new)
    _, _, doc = await api.get(f"/articles/{new}")
    assert doc["data"]["attributes"]["updated_at"] > before
    deletion = emulator.delete("articles", new)
    assert (await api.get(f"/articles/{new}"))[0] == 404
    _, _, entry = await api.get(f"/deletions/{deletion}")
    assert entry["data"]["attributes"]["resource_type"] == "articles"
    assert entry["data"]["attributes"]["resource_id"] == int(new)
    _, _, feed = await api.get(
        "/deletions", {"filter[resource_type]": "articles", "sort": "created_at"}
    )
    assert feed["data"][-1]["id"] == deletion


async def test_touch_and_cascade(emulator: Emulator) -> None:
    deal = next(
        d
        for d in emulator.ids("deals")
        if emulator.resource("deals", d, ["images"])["relationships"]["images"]["data"]
    )
    image = emulator.resource("deals", deal, ["images"])["relationships"]["images"]["data"][0]["id"]
    before = emulator.snapshot("deals")[deal]["updated_at"]
    emulator.update("images", image)  # by default owners are not touched (the hard case)
    assert emulator.snapshot("deals")[deal]["updated_at"] == before
    emulator.data.touch_owners = True
    emulator.update("images", image)
    assert emulator.snapshot("deals")[deal]["updated_at"] > before
    # A deleted image leaves its owners' linkage, under an unchanged stamp by default.
    emulator.data.touch_owners = False
    stamp = emulator.snapshot("deals")[deal]["updated_at"]
    emulator.delete("images", image)
    linked = emulator.resource("deals", deal, ["images"])["relationships"]["images"]["data"]
    assert image not in [d["id"] for d in linked]
    assert emulator.snapshot("deals")[deal]["updated_at"] == stamp
    mall = emulator.ids("malls")[0]
    stores = emulator.ids("stores", mall_id=mall)
    emulator.delete("malls", mall)
    assert not set(stores) & set(emulator.ids("stores"))


def test_data_set_is_deterministic() -> None:
    a, b, c = (
        Emulator(resources=200, seed=5),
        Emulator(resources=200, seed=5),
        Emulator(resources=200, seed=6),
    )
    assert a.snapshot("deals") == b.snapshot("deals")
    assert a.snapshot("deals") != c.snapshot("deals")
    assert set(a.snapshot("stores")) and all(
        a.mall_of("stores", s) in a.ids("malls") for s in a.ids("stores")
    )


# -- webhooks ------------------------------------------------------------------------------------


class Receiver:
    def __init__(self, status: int = 204) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.Response(status=self.status)


async def _receiver(status: int = 204) -> tuple[Receiver, web.AppRunner]:
    rec = Receiver(status)
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.url = f"http://127.0.0.1:{port}/hook"
    return rec, runner


async def test_webhook_subscription_and_batched_delivery(api: Signed, emulator: Emulator) -> None:
    rec, runner = await _receiver()
    try:
        status, _, doc = await api.send(
            "POST",
            "/webhooks",
            {
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": rec.url, "topic": "deals"},
                }
            },
        )
        assert status == 201
        valid(doc)
        hook = doc["data"]["id"]
        _, _, listing = await api.get("/webhooks")
        assert [h["id"] for h in listing["data"]] == [hook]
        ids = emulator.ids("deals")[:3]
        for d in ids:
            emulator.update("deals", d)
        gone = emulator.delete("deals", ids[2])
        await eventually(lambda: sum(len(b["data"]) for b in rec.bodies) >= 4)
        items = [i for b in rec.bodies for i in b["data"]]
        assert len(rec.bodies) < 4  # batched
        assert {
            "type": "updates",
            "attributes": {"resource_type": "deals", "resource_id": int(ids[0])},
        } in items
        assert {
            "type": "deletions",
            "id": gone,
            "attributes": {"resource_type": "deals", "resource_id": int(ids[2])},
        } in items
        status, _, _ = await api.send("DELETE", f"/webhooks/{hook}")
        assert status == 204 and emulator.webhooks() == []
        assert (
            await api.send(
                "POST",
                "/webhooks",
                {
                    "data": {
                        "type": "webhooks",
                        "attributes": {"callback_url": "ftp://x", "topic": "deals"},
                    }
                },
            )
        )[0] == 422
    finally:
        await runner.cleanup()


async def test_failing_receiver_is_unsubscribed_after_five_attempts(
    api: Signed, emulator: Emulator
) -> None:
    rec, runner = await _receiver(status=500)
    try:
        await api.send(
            "POST",
            "/webhooks",
            {
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": rec.url, "topic": "deals"},
                }
            },
        )
        emulator.update("deals", emulator.ids("deals")[0])
        await eventually(lambda: not emulator.webhooks())
        assert len(rec.bodies) == 5 and emulator.dispatcher.auto_unsubscribed == 1
    finally:
        await runner.cleanup()


async def test_webhook_loss_duplication_reorder(api: Signed, emulator: Emulator) -> None:
    rec, runner = await _receiver()
    try:
        await api.send(
            "POST",
            "/webhooks",
            {
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": rec.url, "topic": "events"},
                }
            },
        )
        emulator.faults.webhook_loss_rate = 1.0
        emulator.update("events", emulator.ids("events")[0])
        await asyncio.sleep(0.2)
        assert rec.bodies == [] and emulator.faults.injected["webhook_lost"] == 1
        emulator.faults.webhook_loss_rate = 0
        emulator.faults.webhook_duplicate_rate = 1.0
        emulator.faults.webhook_reorder = True
        emulator.update("events", emulator.ids("events")[1])
        await eventually(lambda: rec.bodies)
        assert (
            len(rec.bodies[0]["data"]) == 2 and rec.bodies[0]["data"][0] == rec.bodies[0]["data"][1]
        )
        assert emulator.faults.injected["webhook_reordered"] >= 1
    finally:
        await runner.cleanup()


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
    proc = await spawn("emulator", "--resources", "300", "--port", "0", "--page-cache-mb", "8")
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


async def test_a_jsonapi_body_of_another_content_type_is_415(emulator: Emulator) -> None:
    body = {
        "data": {
            "type": "accounts",
            "attributes": {"email": emulator.email, "password": emulator.password},
        }
    }
    async with aiohttp.ClientSession() as http:
        url = f"{emulator.base_url}/accounts/login"
        async with http.post(url, json=body) as r:  # application/json
            assert r.status == 415
            doc = await r.json(content_type=None)
            assert "application/vnd.api+json" in doc["errors"][0]["detail"]
        async with http.post(url, json=body, headers=JSONAPI) as r:
            assert r.status == 201
        emulator.app.strict_content_type = False  # the lenient switch
        async with http.post(url, json=body) as r:
            assert r.status == 201


async def test_the_client_sends_jsonapi_bodies_as_jsonapi(
    emulator: Emulator, tmp_path: Path
) -> None:
    from sync.channel.client import ChannelClient
    from sync.core.config import parse_config

    settings = parse_config(
        {
            "upstream": {
                "base_url": emulator.base_url,
                "email": emulator.email,
                "password": emulator.password,
            },
            "mirror": {"path": str(tmp_path / "m.db")},
        }
    )
    assert emulator.app.strict_content_type
    async with ChannelClient(settings.upstream) as client:
        await client.login()  # 415 before: aiohttp's json= says application/json
        resp = await client.request(
            "POST",
            "/webhooks",
            json={
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": "http://127.0.0.1:9/x", "topic": "deals"},
                }
            },
        )
        assert resp.status == 201


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
