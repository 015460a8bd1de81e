"""The emulator's hard readings of issue #30 (`sync.emulator.hard`), each over real HTTP: `sort`
ignored where the spec's row lists none, an upstream refusing includes, a signing window of a
few seconds, faults on `/accounts`; every JSON:API document valid, and the ways to switch them."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import orjson
import pytest
from click.testing import CliRunner

from sync.commands import emulator as emulator_cmd
from sync.emulator import Emulator
from sync.emulator.hard import STRICT_SIGNING_WINDOW, Hard
from tests.support.emulator_client import JSONAPI, MakeEmulator, Signed, control, signed, valid

#: The listings whose spec row lists no `sort` (top-level, then under `/malls/{id}/`).
UNSORTED = ["articles", "contacts", "ifeatures", "job-listings", "mall-messages", "deletions"]
UNSORTED_IN_MALL = ["programs"]
#: The listings whose spec row documents `sort`.
SORTED = ["deals", "events", "malls"]
SORTED_IN_MALL = [
    "events",
    "mall-messages",
    "contacts",
    "ifeatures",
    "job-listings",
    "press-releases",
    "deals",
    "products",
    "social-feeds",
    "stores",
]
#: Related routes (the spec's rows list no `sort` either): they serve their linkage's order.
RELATED = [
    ("articles", "images"),
    ("articles", "malls"),
    ("articles", "products"),
    ("articles", "tags"),
    ("deals", "stores"),
    ("deals", "images"),
    ("deals", "tags"),
    ("events", "groups"),
    ("events", "images"),
    ("job-listings", "images"),
]


async def ids(api: Signed, path: str, params: dict[str, str] | None = None) -> list[int]:
    """The ids of the first page (of 100) of a listing, the document checked valid."""
    status, _, doc = await api.get(path, {"page[size]": "100", **(params or {})})
    assert status == 200, (path, doc)
    valid(doc)
    return [int(r["id"]) for r in doc["data"]]


def mall_with(emu: Emulator, type_name: str, at_least: int = 2) -> str:
    """A mall whose route lists at least `at_least` rows of `type_name` (public deals only)."""
    visibility = "Public" if type_name == "deals" else None
    return next(
        m
        for m in emu.ids("malls")
        if len(emu.ids(type_name, mall_id=m, visibility=visibility)) >= at_least
    )


async def refused(api: Signed, path: str, params: dict[str, str]) -> None:
    """`path` answers 400, a valid JSON:API error naming `include`."""
    status, _, doc = await api.get(path, params)
    assert status == 400, (path, params, doc)
    valid(doc)
    assert doc["errors"][0]["source"] == {"parameter": "include"}


# -- sort_undocumented_ignored -------------------------------------------------------------------


async def test_sort_is_ignored_where_the_spec_row_lists_none(make_emulator: MakeEmulator) -> None:
    """`sort_undocumented_ignored`: `/articles`, `/contacts`, `/ifeatures`, `/job-listings`,
    `/mall-messages`, `/deletions` and `/malls/{id}/programs` serve rows in id order whatever
    `sort` asks, without an error; the routes whose row documents `sort` keep honouring it,
    related routes serve their linkage's order, and `filter[updated_at][gte]` still filters."""
    async with (
        make_emulator(resources=600, seed=21, hard=Hard(sort_undocumented_ignored=True)) as emu,
        signed(emu) as api,
    ):
        for deal in emu.ids("deals")[:3]:
            emu.delete("deals", deal)  # the deletions feed has entries
        by_id = {"sort": "-id"}
        by_stamp = {"sort": "-updated_at,title"}
        for path in UNSORTED:
            plain = await ids(api, f"/{path}")
            assert len(plain) >= 2 and plain == sorted(plain), path
            assert await ids(api, f"/{path}", by_id) == plain, path
            assert await ids(api, f"/{path}", by_stamp) == plain, path
        for sub in UNSORTED_IN_MALL:
            path = f"/malls/{mall_with(emu, sub.replace('-', '_'))}/{sub}"
            plain = await ids(api, path)
            assert len(plain) >= 2 and plain == sorted(plain), path
            assert await ids(api, path, by_id) == plain, path
        for path in SORTED:
            got = await ids(api, f"/{path}", by_id)
            assert len(got) >= 2 and got == sorted(got, reverse=True), path
        for sub in SORTED_IN_MALL:
            path = f"/malls/{mall_with(emu, sub.replace('-', '_'))}/{sub}"
            got = await ids(api, path, by_id)
            assert len(got) >= 2 and got == sorted(got, reverse=True), path
        for owner, rel in RELATED:
            type_name = owner.replace("-", "_")
            rid = max(  # the row with the most related rows
                emu.ids(type_name),
                key=lambda i, t=type_name, r=rel: len(
                    emu.resource(t, i, [r])["relationships"][r]["data"]
                ),
            )
            path = f"/{owner}/{rid}/{rel}"
            plain = await ids(api, path)
            assert plain and await ids(api, path, by_id) == plain, path

        article = emu.ids("articles")[5]
        emu.update("articles", article, {"title": "Fresh"})
        stamp = emu.snapshot("articles")[article]["updated_at"]
        fresh = await ids(api, "/articles", {"filter[updated_at][gte]": stamp, **by_id})
        assert int(article) in fresh and len(fresh) < len(emu.ids("articles"))
        assert fresh == sorted(fresh)

        emu.hard.sort_undocumented_ignored = False  # today's reading: every listing sorts
        got = await ids(api, "/articles", by_id)
        assert got == sorted(got, reverse=True)


# -- includes_allowed ----------------------------------------------------------------------------


async def test_includes_not_modelled_are_refused_by_default(emulator: Emulator) -> None:
    """Without any switch, an include path through a relationship the emulator does not model
    (`variants`, `brand`, `retailer`, `company`) or one no resource has is a 400 naming
    `include`, as JSON:API 1.0 requires, never an empty linkage."""
    async with signed(emulator) as api:
        mall = emulator.ids("malls")[0]
        article = emulator.ids("articles")[0]
        for path, include in (
            ("/articles", "variants"),
            ("/articles", "images.spaceships"),
            (f"/articles/{article}", "variants"),
            (f"/malls/{mall}/products", "brand"),
            (f"/malls/{mall}/stores", "retailer"),
            ("/malls", "company"),
            ("/deals", "locations"),
        ):
            await refused(api, path, {"include": include})


async def test_includes_allowed_refuses_every_other_path(make_emulator: MakeEmulator) -> None:
    """`includes_allowed=("images", "tags")`: an upstream that refuses every include path
    except images and tags (and the paths through them) with a 400 naming `include`, on
    collections, singles, mall routes and related routes; None (the default, and the strict
    profile's) accepts every path the emulator models."""
    hard = Hard(includes_allowed=("images", "tags"))
    async with make_emulator(resources=400, seed=22, hard=hard) as emu, signed(emu) as api:
        mall = emu.ids("malls")[0]
        deal = emu.ids("deals", visibility="Public")[0]
        article = emu.ids("articles")[0]
        for path, include in (
            ("/deals", "images,tags"),
            ("/articles", "images.tags"),
            (f"/deals/{deal}", "tags"),
            (f"/malls/{mall}/stores", "images"),
            (f"/articles/{article}/images", "tags"),
        ):
            status, _, doc = await api.get(path, {"include": include})
            assert status == 200, (path, doc)
            valid(doc)
            assert "included" in doc
        for path, include in (
            ("/deals", "stores"),
            ("/deals", "images,stores"),
            ("/articles", "malls.images"),
            (f"/deals/{deal}", "stores"),
            (f"/malls/{mall}/stores", "products"),
            ("/malls", "events"),
            (f"/articles/{article}/products", "stores"),
        ):
            await refused(api, path, {"include": include})
        status, answer = await control(
            emu, "PATCH", "settings", {"hard": {"includes_allowed": None}}
        )
        assert status == 200 and answer["hard"]["includes_allowed"] is None
        status, _, doc = await api.get("/deals", {"include": "stores"})
        assert status == 200 and doc["included"]
        valid(doc)
        status, answer = await control(
            emu, "PATCH", "settings", {"hard": {"includes_allowed": ["images"]}}
        )
        assert status == 200 and answer["hard"]["includes_allowed"] == ["images"]
        await refused(api, "/deals", {"include": "tags"})


# -- signing_window ------------------------------------------------------------------------------


async def test_signing_window_of_a_few_seconds(make_emulator: MakeEmulator) -> None:
    """`signing_window=5`: a timestamp 3 s off is accepted, 7 s or 10 s off is a 401 (a data
    route or the logout) whose `Date` carries the emulator's clock, and a client that corrects
    its clock from it gets through; 0 is today's 30 s."""
    async with (
        make_emulator(resources=200, seed=23, hard=Hard(signing_window=5.0)) as emu,
        signed(emu) as api,
    ):
        api.offset = 3
        assert (await api.get("/malls"))[0] == 200
        api.offset = -3
        assert (await api.get("/malls"))[0] == 200
        api.offset = 7
        status, headers, doc = await api.get("/malls")
        assert status == 401
        valid(doc)
        assert abs(parsedate_to_datetime(headers["Date"]).timestamp() - emu.now()) < 2
        status, headers = await api.logout()
        assert status == 401 and "Date" in headers

        api.offset = 0
        emu.faults.clock_offset = 10
        status, headers, doc = await api.get("/malls")
        assert status == 401
        valid(doc)
        server = parsedate_to_datetime(headers["Date"]).timestamp()
        assert abs(server - emu.now()) < 2
        api.offset = server - time.time()
        assert (await api.get("/malls"))[0] == 200

        status, answer = await control(emu, "PATCH", "settings", {"hard": {"signing_window": 0}})
        assert status == 200 and answer["hard"]["signing_window"] == 0
        api.offset = 0  # 10 s off: inside the default window
        assert (await api.get("/malls"))[0] == 200


# -- account_faults ------------------------------------------------------------------------------


async def account_call(
    http: aiohttp.ClientSession, emu: Emulator, method: str, path: str, body: Any
) -> tuple[int, Any, Any]:
    async with http.request(method, f"{emu.base_url}{path}", json=body, headers=JSONAPI) as r:
        raw = await r.read()
        return r.status, r.headers, (orjson.loads(raw) if raw else None)


def credentials(email: str, password: str) -> dict[str, Any]:
    return {"data": {"type": "accounts", "attributes": {"email": email, "password": password}}}


async def test_account_faults_reach_login_logout_and_account_creation(
    make_emulator: MakeEmulator,
) -> None:
    """`account_faults`: 5xx, 429, dropped connections, stalls and latency also hit
    `POST /accounts`, `POST /accounts/login` and `DELETE /accounts/logout`; off, they are
    exempt whatever the fault rates."""
    async with (
        make_emulator(resources=200, seed=24, hard=Hard(account_faults=True)) as emu,
        signed(emu) as api,
        aiohttp.ClientSession() as http,
    ):
        f = emu.faults
        login = credentials(emu.email, emu.password)
        calls = (
            ("POST", "/accounts", credentials("new@example.com", "pw-1")),
            ("POST", "/accounts/login", login),
            ("DELETE", "/accounts/logout", api.logout_body()),
        )
        f.error_rate = 1.0
        for method, path, body in calls:
            status, _, doc = await account_call(http, emu, method, path, body)
            assert status in (500, 502, 503), (path, doc)
            valid(doc)
        f.error_rate, f.rate_429, f.retry_after = 0, 1.0, 2
        for method, path, body in calls:
            status, headers, doc = await account_call(http, emu, method, path, body)
            assert status == 429 and headers["Retry-After"] == "2", path
            valid(doc)
        f.rate_429, f.drop_rate = 0, 1.0
        for method, path, body in calls:
            with pytest.raises(aiohttp.ClientError):
                await account_call(http, emu, method, path, body)
        f.drop_rate, f.stall_rate, f.stall_seconds, f.latency = 0, 1.0, 0.2, 0.1
        t0 = time.perf_counter()
        assert (await account_call(http, emu, "POST", "/accounts/login", login))[0] == 201
        assert time.perf_counter() - t0 >= 0.3
        assert f.injected["http_5xx"] == 3 and f.injected["http_429"] == 3
        assert f.injected["dropped"] >= 3 and f.injected["stalled"] == 1  # a DELETE is retried

        f.off()
        f.error_rate = 1.0
        status, answer = await control(
            emu, "PATCH", "settings", {"hard": {"account_faults": False}}
        )
        assert status == 200 and answer["hard"]["account_faults"] is False
        for method, path, body in calls:
            status, _, doc = await account_call(http, emu, method, path, body)
            assert status in (201, 204), (path, doc)
        assert (await api.get("/malls"))[0] in (500, 502, 503)  # data routes still faulted


# -- the strict profile and the ways to switch ---------------------------------------------------


def test_the_new_readings_are_off_by_default_and_strict_sets_them() -> None:
    """Off by default; `Hard.strict()` ignores undocumented sorts, signs within 5 s, faults
    `/accounts` and leaves `includes_allowed` None; values are checked."""
    off = Hard()
    assert not off.sort_undocumented_ignored and not off.account_faults
    assert off.includes_allowed is None and off.signing_window == 0 and not off.on()
    strict = Hard.strict()
    assert strict.sort_undocumented_ignored and strict.account_faults
    assert strict.signing_window == STRICT_SIGNING_WINDOW == 5.0
    assert strict.includes_allowed is None and "includes_allowed" not in strict.on()
    assert {"sort_undocumented_ignored", "signing_window", "account_faults"} <= set(strict.on())
    for bad in (
        {"signing_window": -1},
        {"signing_window": "5"},
        {"signing_window": True},
        {"includes_allowed": "images"},
        {"includes_allowed": ["images", 3]},
        {"account_faults": 1},
    ):
        with pytest.raises(ValueError):
            off.update(bad)
    off.update({"includes_allowed": ["images", "tags"], "signing_window": 2})
    assert off.includes_allowed == ("images", "tags") and off.signing_window == 2.0
    assert off.on() == ["includes_allowed", "signing_window"]
    off.switch_on("includes_allowed")  # no name: every include refused
    assert off.includes_allowed == () and "includes_allowed" in off.on()
    off.switch_on("includes_allowed=off")
    off.switch_on("signing-window")
    assert off.includes_allowed is None and off.signing_window == STRICT_SIGNING_WINDOW


async def test_settings_switch_the_new_readings(make_emulator: MakeEmulator) -> None:
    """`PATCH /_emulator/settings {"hard": {...}}` sets the four readings and answers them;
    a bad value is a 400 (valid JSON:API) that sets nothing."""
    async with make_emulator(resources=200, seed=25) as emu:
        wanted = {
            "sort_undocumented_ignored": True,
            "includes_allowed": ["images", "tags"],
            "signing_window": 5,
            "account_faults": True,
        }
        status, answer = await control(emu, "PATCH", "settings", {"hard": wanted})
        assert status == 200 and {k: answer["hard"][k] for k in wanted} == wanted
        assert emu.hard.includes_allowed == ("images", "tags") and emu.hard.signing_window == 5.0
        for bad in ({"signing_window": -2}, {"includes_allowed": "tags", "account_faults": False}):
            status, err = await control(emu, "PATCH", "settings", {"hard": bad})
            assert status == 400, bad
            valid(err)
        assert emu.hard.account_faults


def test_cli_sets_the_new_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ccsync emulator --hard` takes the new names: `signing_window[=S]`,
    `includes_allowed=a,b`, and the booleans; `--profile strict` has them as `Hard.strict()`."""
    served: list[Emulator] = []

    async def serve(emu: Emulator, *_: Any) -> None:
        served.append(emu)

    monkeypatch.setattr(emulator_cmd, "serve_forever", serve)
    run = CliRunner().invoke
    args = ["--resources", "200", "--hard", "sort-undocumented-ignored", "--hard", "account_faults"]
    args += ["--hard", "signing_window=2.5", "--hard", "includes_allowed=images,tags"]
    result = run(emulator_cmd.emulator_command, args)
    assert result.exit_code == 0, result.output
    assert served[-1].hard == Hard(
        sort_undocumented_ignored=True,
        account_faults=True,
        signing_window=2.5,
        includes_allowed=("images", "tags"),
    )
    result = run(emulator_cmd.emulator_command, ["--resources", "200", "--profile", "strict"])
    assert result.exit_code == 0 and served[-1].hard == Hard.strict()
    result = run(
        emulator_cmd.emulator_command, ["--resources", "200", "--hard", "signing_window=x"]
    )
    assert result.exit_code == 2 and "signing_window" in result.output
