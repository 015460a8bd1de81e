"""The bundled emulator over real HTTP: routes, JSON:API query features, headers and mutations,
every document valid against the JSON:API 1.0 schema. Accounts and signatures are in
test_emulator_auth.py, webhooks in test_emulator_webhooks.py, faults, the page cache, the command
and the `/_emulator/` routes in test_emulator_admin.py."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from sync.emulator import Emulator
from tests.support.emulator_client import Signed, valid

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
