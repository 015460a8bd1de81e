"""The management API where its spec leaves room (issue #30 item 4): the sort parameters probed
with a fallback, the message request's optional and nullable fields, path segments encoded, a
user token where the spec says "user token", and an emulator refusing wrongly typed messages."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses
from structlog.testing import capture_logs
from yarl import URL

from sync.core.config import ManagementSettings, parse_config
from sync.core.errors import ConfigError, InvalidParametersError, UpstreamError
from sync.emulator import Emulator
from sync.management.client import ManagementClient
from sync.management.fields import load_update
from sync.management.press import forget_sort_outcomes, mirror_press_releases, sort_outcome
from sync.management.session import segment
from sync.management.walk import Walk
from sync.store import Mirror
from sync.store.press import PressReleases
from tests.support.management import ccsync, management_config, write

FAKE = "http://mgmt.test"
PRESS = re.compile(r"^http://mgmt\.test/v1/content/press_releases.*$")


@pytest.fixture(autouse=True)
def _fresh_sort_outcomes() -> Iterator[None]:
    """Each test learns the sort outcome anew, and leaves none behind for a later emulator on
    the same port."""
    forget_sort_outcomes()
    yield
    forget_sort_outcomes()


def settings(base_url: str, **extra: Any) -> ManagementSettings:
    s = parse_config(
        {
            "upstream": {"base_url": base_url, "email": "a@b.c", "password": "x"},
            "management": {
                "base_url": base_url,
                "product": "loyalty",
                "loyalty_club": "demo-club",
                "bearer_token": "mgmt-demo-token",
                "locales": ["en"],
                "per_page": 25,
                **extra,
            },
        }
    ).management
    assert s is not None
    return s


async def run(s: ManagementSettings, mirror: Mirror) -> tuple[int, int]:
    async with ManagementClient(s) as client:
        return (await mirror_press_releases(client, PressReleases(mirror.conn), ["en"]))["en"]


def ids(mirror: Mirror) -> set[int]:
    return {r[0] for r in mirror.conn.execute("select id from mgmt_press_releases")}


def headers(emu: Emulator, *, user: bool = True, client: bool = False) -> dict[str, str]:
    h = {"X-User-Agent": "t", "X-Product-Name": "loyalty", "X-Loyalty-Club-Slug": "demo-club"}
    if user:
        h["Authorization"] = f"Bearer {emu.management.token}"
    if client:
        h["X-Client-Authorization"] = emu.management.client_token
    return h


async def call(
    emu: Emulator,
    method: str,
    path: str,
    *,
    body: Any = None,
    params: dict[str, str] | None = None,
    **who: bool,
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            f"{emu.base_url}{path}",
            json=body,
            params=params,
            headers=headers(emu, **who),
        ) as r,
    ):
        return r.status, await r.json()


# -- 1. sort parameters probed, with a fallback ---------------------------------------------------


async def test_the_emulator_refuses_sort_parameters_on_the_switch(emulator: Emulator) -> None:
    emulator.management.refuse_sort = True
    path = "/v1/content/press_releases"
    for params in ({"sort_by[]": "id"}, {"sort_directions[]": "asc"}):
        status, doc = await call(emulator, "GET", path, params=params)
        assert status == 400 and "sort_by" in doc["error"]
    status, doc = await call(emulator, "GET", path)
    assert status == 200 and doc["pagination_info"]["total_count"] == len(emulator.management.press)
    assert emulator.management.sort_refusals == 2


async def test_a_refused_sort_is_walked_without_it_and_remembered(
    emulator: Emulator, mirror: Mirror
) -> None:
    emulator.management.refuse_sort = True
    s = settings(emulator.base_url)
    total = len(emulator.management.press)
    with capture_logs() as logs:
        assert await run(s, mirror) == (total, 0)
        assert await run(s, mirror) == (total, 0)
    assert ids(mirror) == set(emulator.management.press)
    assert sort_outcome(emulator.base_url) is False
    assert emulator.management.sort_refusals == 1  # asked once in the process, then remembered
    refused = [e for e in logs if e["event"] == "press_releases_sort_refused"]
    assert len(refused) == 1 and refused[0]["status"] == 400


async def test_an_honoured_sort_is_remembered_and_logged_once(
    emulator: Emulator, mirror: Mirror
) -> None:
    s = settings(emulator.base_url)
    with capture_logs() as logs:
        await run(s, mirror)
        await run(s, mirror)
    assert sort_outcome(emulator.base_url) is True
    assert [e["event"] for e in logs].count("press_releases_sort_honoured") == 1


async def test_an_unsorted_walk_over_several_pages_prunes_nothing(
    emulator: Emulator, mirror: Mirror
) -> None:
    """In an unknown order a row can be skipped by every page, and neighbours on a page say
    nothing about the ids between them: a row gone upstream is kept, and the warning says why."""
    s = settings(emulator.base_url)
    await run(s, mirror)
    emulator.management.refuse_sort = True
    del emulator.management.press[5]
    emulator.management.shift_at_page = 2  # and a row moves mid-walk
    with capture_logs() as logs:
        rows, removed = await run(s, mirror)
    assert removed == 0 and 5 in ids(mirror)
    assert ids(mirror) >= set(emulator.management.press)
    (deferred,) = [e for e in logs if e["event"] == "press_releases_prune_deferred"]
    assert "sort_by[]" in deferred["reason"]


async def test_an_unsorted_list_on_one_page_proves_rows_gone(
    emulator: Emulator, mirror: Mirror
) -> None:
    s = settings(emulator.base_url, per_page=100)
    await run(s, mirror)
    emulator.management.refuse_sort = True
    for i in range(1, 31):
        del emulator.management.press[i]
    rows, removed = await run(s, mirror)
    assert (rows, removed) == (len(emulator.management.press), 30)
    assert ids(mirror) == set(emulator.management.press)


def _page(ids_: list[int], page_no: int, last: bool) -> dict[str, Any]:
    return {
        "press_releases": [{"id": i, "title": f"t{i}"} for i in ids_],
        "pagination_info": {
            "current_page": page_no,
            "next_page": None if last else page_no + 1,
            "is_last_page": last,
        },
    }


async def test_any_400_or_422_to_the_first_page_is_asked_again_without_the_order() -> None:
    asked: list[URL] = []

    def answer(url: URL, **_: Any) -> CallbackResult:
        asked.append(url)
        if "sort_by[]" in url.query:
            return CallbackResult(status=422, payload={"error": "Invalid parameters"})
        return CallbackResult(payload=_page([3, 1, 2], 1, last=True))

    walk = Walk()
    with aioresponses() as m:
        m.get(PRESS, callback=answer, repeat=True)
        async with ManagementClient(settings(FAKE)) as client:
            seen = [p["id"] async for page in client.press_releases("en", walk) for p in page]
    assert seen == [3, 1, 2] and len(asked) == 2
    assert not walk.by_id and walk.proves_absent(9)  # one page: the whole list at once
    assert sort_outcome(FAKE) is False


async def test_a_later_page_refusing_the_order_restarts_the_walk_without_it() -> None:
    def answer(url: URL, **_: Any) -> CallbackResult:
        page_no = int(url.query["page_no"])
        if "sort_by[]" in url.query and page_no == 2:
            return CallbackResult(status=400, payload={"error": "sort_by[] is not permitted"})
        return CallbackResult(
            payload=_page([page_no * 10, page_no * 10 + 1], page_no, page_no == 2)
        )

    walk = Walk()
    with aioresponses() as m:
        m.get(PRESS, callback=answer, repeat=True)
        async with ManagementClient(settings(FAKE)) as client:
            pages = [[p["id"] for p in page] async for page in client.press_releases("en", walk)]
    assert pages == [[10, 11], [10, 11], [20, 21]]  # page 1 sorted, then the unsorted walk
    assert not walk.by_id and not walk.proves_absent(15) and not walk.boundaries


async def test_a_refusal_that_is_not_about_the_order_is_raised() -> None:
    answers = iter([401, 422, 422])

    def answer(url: URL, **_: Any) -> CallbackResult:
        return CallbackResult(status=next(answers), payload={"error": "Invalid parameters"})

    with aioresponses() as m:
        m.get(PRESS, callback=answer, repeat=True)
        async with ManagementClient(settings(FAKE)) as client:
            with pytest.raises(UpstreamError) as first:
                [p async for p in client.press_releases("en")]  # 401: not retried unsorted
            assert first.value.status == 401
            with pytest.raises(InvalidParametersError):  # 422 twice: sorted, then unsorted
                [p async for p in client.press_releases("en")]
    assert sort_outcome(FAKE) is None  # nothing learned


# -- 2. the message request's optional and nullable fields ----------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"marketing": {"opt_in": True, "category": "newsletter"}},
        {"marketing": "transactional"},
        {"marketing": None},
        {"channels": [{"type": "sms", "include_footer": False}]},
        {"channels": [{"type": "email", "sender": {"from_name": "Club"}}]},
        {"channels": [{}]},
        {"channels": []},
        {"name": "Hi", "shorten_urls": True, "track_in_shortener": False, "campaign_id": 3},
    ],
)
def test_what_the_message_schema_allows_is_accepted(tmp_path: Path, message: Any) -> None:
    assert load_update(write(tmp_path, "m.json", {"message": message}), "message") == message


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"name": None}, "name: may not be null"),
        ({"shorten_urls": None}, "shorten_urls: may not be null"),
        ({"campaign_id": None}, "campaign_id: may not be null"),
        ({"channels": None}, "channels: may not be null"),
        ({"campaign_id": "3"}, "campaign_id: Input should be a valid integer"),
        ({"campaign_id": True}, "campaign_id: Input should be a valid integer"),
        ({"shorten_urls": "yes"}, "shorten_urls: Input should be a valid boolean"),
        ({"channels": [{"sender": None}]}, "channels.0.sender: may not be null"),
        ({"channels": [{"type": None}]}, "channels.0.type: may not be null"),
        ({"channels": [{"sender": {"from_email": 5}}]}, "channels.0.sender.from_email: Input"),
        ({"channels": [{"template": {"id": 1}}]}, "channels.0.template: not a writable field"),
        ({"channels": ["sms"]}, "channels.0: Input should be"),
    ],
)
def test_what_the_message_schema_forbids_is_refused_by_name(
    tmp_path: Path, message: Any, needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_update(write(tmp_path, "m.json", {"message": message}), "message")
    assert needle in str(info.value)


async def test_optional_and_nullable_message_fields_reach_the_emulator(emulator: Emulator) -> None:
    old = copy.deepcopy(emulator.management.messages[("sms", 3)]["channels"][0])
    async with ManagementClient(settings(emulator.base_url)) as client:
        out = await client.update_message(
            "sms",
            3,
            {"marketing": {"opt_in": True}, "channels": [{"type": "sms", "include_footer": False}]},
        )
        assert out["marketing"] == {"opt_in": True}
        (channel,) = out["channels"]
        assert channel["include_footer"] is False
        assert channel["sender"] == old["sender"] and channel["template"] == old["template"]
        with pytest.raises(InvalidParametersError) as info:
            await client.update_message("sms", 3, {"name": None, "campaign_id": "x"})
    assert info.value.url is None and set(info.value.details) == {"name", "campaign_id"}


# -- 3. path segments encoded ---------------------------------------------------------------------


def test_a_segment_encodes_every_reserved_character() -> None:
    assert segment("a/b c?d#e%f&g") == "a%2Fb%20c%3Fd%23e%25f%26g"
    assert segment(42) == "42"


async def test_the_service_lands_in_one_encoded_path_segment(emulator: Emulator) -> None:
    service = "news/letter ?x=1#top%"
    emulator.management.messages[(service, 1)] = copy.deepcopy(
        emulator.management.messages[("sms", 1)]
    )
    async with ManagementClient(settings(emulator.base_url)) as client:
        out = await client.update_message(service, 1, {"name": "Encoded"})
    assert out["name"] == "Encoded"
    assert emulator.management.messages[(service, 1)]["name"] == "Encoded"
    assert emulator.management.messages[("sms", 1)]["name"] != "Encoded"


# -- 4. a user token where the spec says "user token" ---------------------------------------------


def client_only(emu: Emulator, tmp_path: Path) -> str:
    token = emu.management.client_token
    return management_config(tmp_path, emu, "client-only.toml", client_token=token)


async def test_a_client_token_alone_stops_the_commands_that_need_a_user_token(
    emulator: Emulator, tmp_path: Path
) -> None:
    c = client_only(emulator, tmp_path)
    before = copy.deepcopy(emulator.management.messages[("sms", 2)])
    f = str(write(tmp_path, "m.json", {"name": "Never sent"}))
    rc, _, err = await ccsync(
        emulator, "messages", "update", "sms", "2", "--file", f, "--config", c
    )
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "[management] bearer_token is required for the message update" in err
    assert "bearer_token_env" in err and "bearer_token_credential" in err
    assert emulator.management.messages[("sms", 2)] == before
    rc, _, err = await ccsync(emulator, "backfill", "--quiet", "--config", c)
    assert rc == 2 and "[management] bearer_token is required for the press release list" in err
    assert not (tmp_path / "m.db").exists()  # refused up front, before any listing
    # The article update declares no security scheme: the client token serves it.
    a = str(write(tmp_path, "a.json", {"status": "draft"}))
    rc, _, err = await ccsync(emulator, "articles", "update", "2", "--file", a, "--config", c)
    assert rc == 0, err
    assert emulator.management.articles[2]["status"] == "draft"


async def test_the_library_refuses_too_before_sending(emulator: Emulator) -> None:
    s = settings(
        emulator.base_url, bearer_token=None, client_token=emulator.management.client_token
    )
    async with ManagementClient(s) as client:
        with pytest.raises(ConfigError, match=r"\[management\] bearer_token is required"):
            [p async for p in client.press_releases("en")]
        with pytest.raises(ConfigError, match="the message update"):
            await client.update_message("sms", 1, {"name": "x"})


async def test_the_emulator_requires_a_user_token_where_the_spec_says_so(
    emulator: Emulator,
) -> None:
    message = {"message": {"name": "x"}}
    for method, path, body in (
        ("GET", "/v1/content/press_releases", None),
        ("PUT", "/v1/messages/sms/1", message),
    ):
        status, doc = await call(emulator, method, path, body=body, user=False, client=True)
        assert status == 401 and "user token" in doc["error"], path
        status, _ = await call(emulator, method, path, body=body, user=True, client=True)
        assert status == 200, path
    status, _ = await call(
        emulator,
        "PUT",
        "/v1/content/management/articles/1",
        body={"article": {"status": "draft"}},
        user=False,
        client=True,
    )
    assert status == 200


# -- 5. the emulator refuses wrongly typed message fields -----------------------------------------

SENDER = {"from_email": "a@b.c", "from_name": "Club"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": 5}, "name"),
        ({"name": None}, "name"),
        ({"shorten_urls": "yes"}, "shorten_urls"),
        ({"track_in_shortener": 1}, "track_in_shortener"),
        ({"campaign_id": "3"}, "campaign_id"),
        ({"campaign_id": True}, "campaign_id"),
        ({"channels": {"type": "sms"}}, "channels"),
        ({"channels": None}, "channels"),
        ({"channels": ["sms"]}, "channels"),
        ({"channels": [{"type": 7}]}, "channels[0].type"),
        ({"channels": [{"include_footer": "no"}]}, "channels[0].include_footer"),
        ({"channels": [{"sender": "club"}]}, "channels[0].sender"),
        ({"channels": [{"sender": None}]}, "channels[0].sender"),
        ({"channels": [{"sender": {**SENDER, "from_email": 1}}]}, "channels[0].sender.from_email"),
        ({"channels": [{"sender": {**SENDER, "reply_to": "x"}}]}, "channels[0].sender.reply_to"),
    ],
)
async def test_the_emulator_answers_422_to_wrongly_typed_message_fields(
    emulator: Emulator, change: dict[str, Any], field: str
) -> None:
    before = copy.deepcopy(emulator.management.messages[("sms", 5)])
    status, doc = await call(emulator, "PUT", "/v1/messages/sms/5", body={"message": change})
    assert status == 422 and doc["error"] == "Invalid parameters"
    assert list(doc["details"]) == [field] and isinstance(doc["details"][field], list)
    assert emulator.management.messages[("sms", 5)] == before


async def test_the_emulator_takes_any_marketing_value_and_partial_channels(
    emulator: Emulator,
) -> None:
    for marketing in ({"opt_in": True}, "transactional", None):
        status, doc = await call(
            emulator, "PUT", "/v1/messages/sms/6", body={"message": {"marketing": marketing}}
        )
        assert status == 200 and doc["message"]["marketing"] == marketing
    status, doc = await call(
        emulator,
        "PUT",
        "/v1/messages/sms/6",
        body={"message": {"channels": [{"type": "sms", "sender": {"from_name": "New"}}]}},
    )
    assert status == 200
    (channel,) = doc["message"]["channels"]
    assert channel["sender"] == {"from_email": "club@example.com", "from_name": "New"}
    assert json.dumps(channel["template"])  # kept
