"""The upstream client's routes, unit level: the parameters each listing, fetch, deletions,
webhooks and hours request sends, and how pages and their `links` are read, against canned
answers at the HTTP seam (aioresponses). Sessions, retries and errors: `test_channel.py`."""

from __future__ import annotations

import re
from datetime import date

import pytest
from aioresponses import aioresponses

from sync.channel.listing import Listing
from sync.channel.pages import Page, last_page_number
from sync.core.errors import UpstreamError
from sync.model import catalogue
from sync.model.scopes import Scope
from tests.support.channel_fakes import (
    BASE,
    DEALS_URL,
    LOGIN,
    collection,
    make_client,
    page_doc,
    token_doc,
)

DEALS = catalogue.TYPES["deals"]


def params_of(m: aioresponses) -> list[dict[str, str]]:
    return [
        {k: v for k, v in key[1].query.items() if not k.startswith("auth_")}
        for key, calls in m.requests.items()
        for _ in calls
        if key[0] == "GET"
    ]


async def test_every_listing_parameter_is_explicit_and_sort_can_be_overridden() -> None:
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS_URL, payload=page_doc())
        m.get(DEALS_URL, payload=page_doc())
        async with make_client() as c:
            await c.list_page(
                Scope(catalogue.TYPES["deals"], None, {"filter[visibility]": "Unlisted"}), 3
            )
            deals = Scope(catalogue.TYPES["deals"])
            await c.list_page(Listing(deals, {"sort": "updated_at"}, ["updated_at"], False), 1)
        urls = [str(k[1]) for k in m.requests if k[0] == "GET"]
        calls = [c for k, v in m.requests.items() if k[0] == "GET" for c in v]
        first, second = (dict(c.kwargs["params"]) for c in calls)
    assert urls
    assert first["page[size]"] == "100" and first["page[number]"] == "3" and first["sort"] == "id"
    assert (
        first["include"] == "images,images.tags,tags,tags.tags,stores"
        and first["filter[visibility]"] == "Unlisted"
    )
    assert {"auth_id", "auth_timestamp", "auth_token"} <= set(first)
    assert (
        second["sort"] == "updated_at"
        and second["fields[deals]"] == "updated_at"
        and "include" not in second
    )


async def test_mall_scoped_listing_fields_and_explicit_params() -> None:
    stores = re.compile(r"^http://upstream\.test/malls/7/stores\?.*$")
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(stores, payload=collection([1], rtype="stores"))
        m.get(stores, payload=collection([1], rtype="stores"))
        async with make_client(page_size=50) as c:
            await c.list_page(Listing(Scope(catalogue.TYPES["stores"], 7), size=10), 2)
            await c.list_page(Listing(Scope(catalogue.TYPES["stores"], 7), fields=[]), 1)
        with pytest.raises(ValueError, match="mall id"):
            catalogue.TYPES["stores"].list_path(None)
        first, second = sorted(params_of(m), key=lambda p: p["page[size]"])
    assert first["page[size]"] == "10" and first["page[number]"] == "2" and first["sort"] == "id"
    assert first["include"] == catalogue.TYPES["stores"].include
    assert "fields[stores]" not in first
    assert second["page[size]"] == "50" and second["fields[stores]"] == ""


async def test_iter_pages_follows_links_last_and_stops_on_an_empty_page() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(DEALS_URL, payload=collection([1, 2], last=3))
        m.get(DEALS_URL, payload=collection([3, 4], last=3, included=2))
        m.get(DEALS_URL, payload=collection([5], last=3))
        m.get(DEALS_URL, payload=collection([], last=9))
        m.get(DEALS_URL, payload=collection([6], last=9))
        async with make_client() as c:
            pages = [p async for p in c.iter_pages(Scope(DEALS))]
            more = [p async for p in c.iter_pages(Scope(DEALS), start=4)]
    assert [p.number for p in pages] == [1, 2, 3] and pages[0].last == 3
    assert [r["id"] for p in pages for r in p.resources] == ["1", "2", "3", "4", "5"]
    assert len(pages[1].included) == 2 and pages[0].meta["scripts"]
    assert pages[0].api_version is None
    assert [p.number for p in more] == [4] and more[0].resources == []


async def test_fetch_ids_limits_batches() -> None:
    async with make_client() as c:
        with pytest.raises(ValueError, match="at most 100"):
            await c.fetch_ids(Scope(catalogue.TYPES["deals"]), list(range(101)))


async def test_fetch_ids_and_deletions_and_webhooks_params() -> None:
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(re.compile(r"^http://upstream\.test/deals\?.*"), payload=collection([3, 5]))
        m.get(
            re.compile(r"^http://upstream\.test/deletions\?.*"),
            payload=collection([9], rtype="deletions"),
        )
        m.get(
            re.compile(r"^http://upstream\.test/webhooks\?.*page%5Bnumber%5D=1.*"),
            payload=collection([1, 2], last=2, rtype="webhooks"),
        )
        m.get(
            re.compile(r"^http://upstream\.test/webhooks\?.*page%5Bnumber%5D=2.*"),
            payload=collection([3], last=2, rtype="webhooks"),
        )
        m.post(
            re.compile(r"^http://upstream\.test/webhooks\?.*"),
            status=201,
            payload={"data": {"id": "4", "type": "webhooks"}},
        )
        m.delete(re.compile(r"^http://upstream\.test/webhooks/4\?.*"), status=204)
        async with make_client() as c:
            page = await c.fetch_ids(Scope(DEALS), [3, "5"])
            empty = await c.fetch_ids(Scope(DEALS), [])
            dels = await c.list_deletions(2, since="2024-01-01T00:00:00.000Z", size=20)
            hooks = await c.webhooks.list_all()
            sub = await c.webhooks.subscribe("http://127.0.0.1:9/hook", "deals")
            await c.webhooks.unsubscribe("4")
        gets = params_of(m)
        posts = [calls[0].kwargs["json"] for key, calls in m.requests.items() if key[0] == "POST"]
    fetch = next(p for p in gets if "filter[id]" in p)
    assert fetch["filter[id]"] == "3,5" and fetch["page[size]"] == "100"
    assert fetch["page[number]"] == "1" and fetch["include"] == DEALS.include
    assert [r["id"] for r in page.resources] == ["3", "5"] and empty == Page([], [], {}, 1, 1, None)
    d = next(p for p in gets if "filter[created_at][gte]" in p)
    assert d == {
        "page[size]": "20",
        "page[number]": "2",
        "sort": "created_at",
        "filter[created_at][gte]": "2024-01-01T00:00:00.000Z",
    }
    assert dels.resources[0]["id"] == "9"
    assert [h["id"] for h in hooks] == ["1", "2", "3"]
    hook_params = [p for p in gets if p.get("page[size]") == "100" and "filter[id]" not in p]
    assert all(p["sort"] == "id" for p in hook_params)
    assert sub == {"id": "4", "type": "webhooks"}
    assert posts[-1] == {
        "data": {
            "type": "webhooks",
            "attributes": {"callback_url": "http://127.0.0.1:9/hook", "topic": "deals"},
        }
    }


async def test_hours_and_current_hours() -> None:
    day = {"id": "2024-05-01", "type": "hours", "attributes": {"date": "2024-05-01"}}
    with aioresponses() as m:
        m.post(LOGIN, status=201, payload={"data": {"attributes": {"authentication_token": "t"}}})
        m.get(re.compile(r"^http://upstream\.test/malls/3/hours\?.*"), payload={"data": [day]})
        m.get(
            re.compile(r"^http://upstream\.test/malls/3/current-hours\?.*"),
            payload={"open": True},
        )
        m.get(re.compile(r"^http://upstream\.test/malls/4/hours\?.*"), payload={"days": []})
        async with make_client() as c:
            hours = await c.hours(3, date(2024, 5, 1), date(2024, 5, 7))
            current = await c.current_hours(3)
            with pytest.raises(UpstreamError, match="data"):
                await c.hours(4, date(2024, 5, 1), date(2024, 5, 7))
        q = params_of(m)[0]
    assert hours == [day] and current == {"open": True}
    assert q == {"from": "2024-05-01", "to": "2024-05-07"}


def test_links_last_parsing() -> None:
    assert last_page_number({"links": {"last": f"{BASE}/x?page[number]=12&page[size]=5"}}) == 12
    assert last_page_number({"links": {"last": {"href": f"{BASE}/x?page%5Bnumber%5D=3"}}}) == 3
    assert last_page_number({"links": {"last": f"{BASE}/x?page%5Bnumber%5D=0"}}) == 1
    assert last_page_number({"links": {}}) == 1 and last_page_number({}) == 1
