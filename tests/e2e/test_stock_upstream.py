"""A stock JSON:API server as the upstream (#38): its habits the spec leaves open, each handled.

The emulator serves the habits of Django REST framework JSON:API on switches (`Hard`): a page
past the last answers 404 "Invalid page.", one include path answers 500 (`tags.tags`), a nested
path alone is refused (`images.tags`), no `X-API-Version` and no ETag. Faults the emulator has
no switch for (a mall route lost while the mall is served) are injected at the HTTP seam.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aioresponses import aioresponses

from sync.channel.client import ChannelClient
from sync.channel.pages import Page, last_page_number
from sync.channel.paging import REASKS, Paging, next_number
from sync.channel.profiler import Profiler
from sync.core.errors import ListingMissingError, NotFoundError
from sync.emulator import Emulator
from sync.emulator.hard import Hard
from sync.jobs.evidence import Evidence
from sync.jobs.malls.mallincludes import MallIncludes
from sync.jobs.probe import probe
from sync.jobs.proving.reconcile import Reconciler, reconcile_every_type
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.processes import run
from tests.support.settings import settings_for, upstream_keys, write_config

TYPES = ["malls", "contacts", "stores"]


def _exactly(emu: Emulator, type_name: str, n: int, mall: str | None = None) -> None:
    """Give `type_name` (in `mall`) exactly `n` rows: created or deleted."""
    ids = emu.ids(type_name, mall_id=mall)
    for rid in ids[n:]:
        emu.delete(type_name, rid)
    for _ in range(n - len(ids)):
        emu.create(type_name, mall_id=mall)
    assert len(emu.ids(type_name, mall_id=mall)) == n


async def test_exact_pages_behind_a_404_past_the_end_backfill_and_reconcile_exact(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A mall with exactly 100 stores and 200 contacts, behind an upstream whose page past the
    last is a 404: the backfill is exact with exit 0 (no mall read as gone), and so is the
    reconcile after it."""
    async with make_emulator(resources=300, seed=3, malls=2, hard=Hard(past_end_404=True)) as emu:
        mall = emu.ids("malls")[0]
        _exactly(emu, "stores", 100, mall)
        _exactly(emu, "contacts", 200)
        db = tmp_path / "m.db"
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream={**upstream_keys(emu, "STOCK_PW"), "types": TYPES},
            mirror={"path": db},
        )
        env = {"STOCK_PW": emu.password}
        rc, out, err = await run("backfill", "--config", str(cfg), env=env)
        assert rc == 0, err[-3000:]
        assert compare(db, emu, TYPES).differences == 0
        rc, out, err = await run("reconcile", "--config", str(cfg), env=env)
        assert rc == 0, err[-3000:]
        result = compare(db, emu, TYPES)
        assert result.differences == 0, result.summary()
        with sqlite3.connect(db) as conn:
            assert conn.execute("select count(*) from malls where id = ?", (mall,)).fetchone()[0]
            held = conn.execute("select count(*) from malls_stores where malls_id = ?", (mall,))
            assert held.fetchone()[0] == 100


def _mock_404(m: aioresponses, base: str, path: str) -> None:
    m.get(re.compile(re.escape(base + path) + r"(\?.*)?$"), status=404, repeat=True)


async def test_a_404_on_page_1_of_a_mall_route_fails_the_scope_when_the_mall_is_served(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`/malls/{id}/stores` answers 404 on page 1 while `GET /malls/{id}` serves the mall: the
    reconcile and the backfill fail naming the listing, and nothing of the mall is deleted."""
    async with make_emulator(resources=300, seed=3, malls=2) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=TYPES, retry_budget=5.0)
        await run_backfill(settings)
        mall = emu.ids("malls")[0]
        held = _held(settings.mirror.path, mall)
        with aioresponses(passthrough_unmatched=True) as m:
            _mock_404(m, emu.base_url, f"/malls/{mall}/stores")
            mirror = Mirror.open(settings.mirror.path)
            try:
                async with ChannelClient(settings.upstream) as client:
                    scopes = scopes_of(catalogue.TYPES["stores"], [int(mall)])
                    with pytest.raises(ListingMissingError, match=f"GET /malls/{mall} serves"):
                        await Reconciler(client, mirror).reconcile(scopes)
            finally:
                mirror.close()
            with pytest.raises(ListingMissingError, match=f"/malls/{mall}/stores"):
                await run_backfill(settings, restart=True)
        assert _held(settings.mirror.path, mall) == held and held[1] > 0
        with sqlite3.connect(settings.mirror.path) as conn:
            tombs = conn.execute("select count(*) from _sync_tombstones where type = 'malls'")
            assert tombs.fetchone()[0] == 0


async def test_a_promised_page_refused_once_during_the_backfill_is_asked_again(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Page 2 of `/deals`, promised by page 1's `links.last`, answers 404 once (rows left the
    listing and came back between two requests): the backfill asks page 1 again, finds the page
    still promised, asks it again and completes with every row (it used to fail the type)."""
    async with make_emulator(resources=300, seed=5, malls=2, hard=Hard(past_end_404=True)) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=["deals"], page_size=10)
        page_2 = re.escape(emu.base_url + "/deals") + r"\?(.*&)?page(%5B|\[)number(%5D|\])=2(&.*)?$"
        with aioresponses(passthrough_unmatched=True) as m:
            m.get(re.compile(page_2), status=404, body="Invalid page.")
            await run_backfill(settings)
            asked = sum(len(v) for k, v in m.requests.items() if re.search(page_2, str(k[1])))
        assert asked >= 2, asked  # refused once, then asked again and served
        result = compare(settings.mirror.path, emu, types=["deals"])
        assert result.rows_compared > 0 and result.differences == 0, result.summary()


def _held(db: Path, mall: str) -> tuple[int, int]:
    """(1 if the mirror holds `mall`, its store memberships)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute("select count(*) from malls where id = ?", (mall,)).fetchone()[0]
        n = conn.execute("select count(*) from malls_stores where malls_id = ?", (mall,))
        return row, n.fetchone()[0]


async def test_a_mall_is_gone_only_when_get_malls_id_answers_404(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The listing's 404 is followed by `GET /malls/{id}`; its 404 makes the mall gone."""
    async with make_emulator(resources=300, seed=3, malls=2) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=TYPES, retry_budget=5.0)
        await run_backfill(settings)
        mall = emu.ids("malls")[0]
        with aioresponses(passthrough_unmatched=True) as m:
            _mock_404(m, emu.base_url, f"/malls/{mall}/stores")
            _mock_404(m, emu.base_url, f"/malls/{mall}")
            mirror = Mirror.open(settings.mirror.path)
            try:
                async with ChannelClient(settings.upstream) as client:
                    result = await Reconciler(client, mirror).reconcile(
                        scopes_of(catalogue.TYPES["stores"], [int(mall)])
                    )
            finally:
                mirror.close()
            single = [k for k in m.requests if str(k[1]).split("?")[0].endswith(f"/malls/{mall}")]
        assert result.mall_gone and len(single) == 1
        with sqlite3.connect(settings.mirror.path) as conn:
            assert not conn.execute("select count(*) from malls where id = ?", (mall,)).fetchone()[
                0
            ]


async def test_an_include_path_answering_500_is_refused_fast_and_the_backfill_completes(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`include=tags.tags` answers 500: the probe marks that path refused (why kept) after a
    few 500s, not the retry budget's, and the backfill completes with the tags' linkage."""
    types = ["malls", "deals"]
    hard = Hard(include_path_500=True)
    async with make_emulator(resources=300, seed=4, malls=2, hard=hard) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=types, retry_budget=600.0)
        async with ChannelClient(settings.upstream) as client:
            profile = await Profiler(client).probe([catalogue.TYPES[t] for t in types], [])
            served_500 = client.session.stats.statuses[500]
        deals = profile.routes["/deals"]
        assert deals.includes["tags.tags"] == "refused" and deals.includes["tags"] == "linkage"
        assert "HTTP 500" in deals.include_errors["tags.tags"]
        assert served_500 <= 3  # INCLUDE_ATTEMPTS, not the 25 of a retry budget
        seen: dict[str, Any] = {}
        report = await run_backfill(settings, wrap=lambda c: seen.setdefault("client", c))
        assert not report.types["deals"].error
        # Three deal scopes (visibilities) side by side meet it; one finds the culprit.
        assert seen["client"].session.stats.statuses[500] <= 3 * 4
        result = compare(settings.mirror.path, emu, types)
        assert result.differences == 0, result.summary()
        lines = status_lines(status_data(settings.mirror.path))
        assert any("tags.tags (HTTP 500" in line for line in lines), lines
        # Retried at the next probe: served again, it is used again.
        emu.hard.include_path_500 = False
        mirror = Mirror.open(settings.mirror.path)
        try:
            # The stored profile, refusal included.
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                assert client.profile is not None
                assert "tags.tags" in client.profile.refused_includes(catalogue.TYPES["deals"])
                again = await Profiler(client).probe([catalogue.TYPES[t] for t in types], [])
        finally:
            mirror.close()
        assert again.routes["/deals"].includes["tags.tags"] == "linkage"


async def test_a_refused_nested_path_leaves_its_parent_served_and_no_route_is_walked(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`images.tags` refused (400) while `images` is served: the deals' images linkage comes
    from `include=images`, no `/deals/{id}/images` is asked, and status says so."""
    types = ["malls", "deals"]
    async with make_emulator(
        resources=300, seed=5, malls=2, hard=Hard(nested_include_400=True)
    ) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=types)
        await run_backfill(settings)
        result = compare(settings.mirror.path, emu, types)
        assert result.differences == 0, result.summary()
        lines = status_lines(status_data(settings.mirror.path))
        related = [r for r in emu.requests.routes if r.startswith("/deals/{id}/")]
    assert related == [], related
    line = next(x for x in lines if x.strip().startswith("/deals "))
    assert "images.tags (HTTP 400" in line and "linkage from include=images" in line, line
    assert "images (" not in line.replace("images.tags (", ""), line


async def test_the_probe_says_what_was_not_served_and_finishes_without_the_retry_budget(
    make_emulator: Any, tmp_path: Path
) -> None:
    """No `X-API-Version`, no ETag, a 500 on one include path, a 404 past the end: the probe
    names what was not served instead of "?", and lists what it could not use and why."""
    hard = Hard(
        no_version_headers=True,
        include_path_500=True,
        past_end_404=True,
        no_relationship_links=True,
    )
    async with make_emulator(resources=300, seed=6, malls=2, hard=hard) as emu:
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream={**upstream_keys(emu, "STOCK_PW"), "types": ["malls", "deals", "stores"]},
            mirror={"path": tmp_path / "m.db"},
        )
        rc, out, err = await run("probe", "--config", str(cfg), env={"STOCK_PW": emu.password})
        assert rc == 0, err[-3000:]
        profile = await probe(settings_for(emu, tmp_path / "n.db", types=["deals"]))
        past_end = emu.requests.routes["/deals"]
    assert "api version: not served (no X-API-Version header)" in out, out
    assert "could not use:" in out
    assert "/deals include=tags.tags: HTTP 500" in out, out
    assert "/deals: no ETag" in out, out
    assert profile.api_version is None and past_end > 0


def test_links_next_says_where_a_listing_ends_when_links_last_is_not_served() -> None:
    base = "https://upstream.test/contacts"
    assert last_page_number({"links": {"next": None, "prev": f"{base}?page[number]=2"}}, 3) == 3
    assert last_page_number({"links": {"next": f"{base}?page[number]=4"}}, 3) == 4
    assert last_page_number({"links": {"last": f"{base}?page[number]=9", "next": None}}, 3) == 9


class _Walked:
    """A listing of `pages` full pages (2 rows each) whose pages past `served` answer `status`;
    `last` is what each page's `links.last` says."""

    def __init__(self, pages: int, last: int, served: int, status: int = 404) -> None:
        self.pages, self.last, self.served, self.status = pages, last, served, status
        self.asked: list[int] = []

    async def fetch(self, number: int) -> Page:
        self.asked.append(number)
        if number > self.served:
            raise NotFoundError("not found: Invalid page.", url="u", status=self.status)
        rows = [{"id": str(number * 10 + i)} for i in range(2 if number <= self.pages else 0)]
        return Page(rows, [], {}, number, self.last, None)


async def _walk(listing: _Walked) -> list[int]:
    paging = Paging(2)
    return [p.number async for p in paging.walk(listing.fetch, 1, next_number)]


async def test_a_404_past_the_promised_pages_ends_the_walk_and_one_before_them_fails_it() -> None:
    """Two full pages, `links.last` 2: page 3 answering 404 (or 400) is the end. `links.last` 3
    and page 3 answering 404: a failure, raised, after page 2 was asked again and still
    promised it, and page 3 asked again, `REASKS` times."""
    for status in (404, 400):
        assert await _walk(_Walked(pages=2, last=2, served=2, status=status)) == [1, 2]
    promised = _Walked(pages=3, last=3, served=2)
    with pytest.raises(NotFoundError):
        await _walk(promised)
    assert promised.asked == [1, 2, 3] + [2, 3] * REASKS
    # The listing shrank while walked: page 2 asked again now ends it, so the 404 is the end.
    shrank = _Walked(pages=3, last=3, served=2)

    async def fetch(number: int) -> Page:
        page = await shrank.fetch(number)
        return Page(page.resources, [], {}, number, 2 if len(shrank.asked) > 3 else 3, None)

    paging = Paging(2)
    assert [p.number async for p in paging.walk(fetch, 1, next_number)] == [1, 2]
    # Page 1 is always promised: its 404 is never the end of anything.
    with pytest.raises(NotFoundError):
        await _walk(_Walked(pages=0, last=1, served=0))


async def test_a_promised_page_refused_once_then_served_is_read_not_lost() -> None:
    """Paging by number is no snapshot: rows leave a listing and arrive (a late commit) between
    two requests, so a promised page may answer 404 once and be served when asked again. The
    walk reads it and goes on: the rows on it and past it are not lost (a walk that ended there
    would leave page 3's rows out of the mirror)."""
    flicker = _Walked(pages=3, last=3, served=2)

    async def fetch(number: int) -> Page:
        if number == 3 and flicker.asked.count(3) >= 1:
            flicker.served = 3  # the page is back
        return await flicker.fetch(number)

    paging = Paging(2)
    assert [p.number async for p in paging.walk(fetch, 1, next_number)] == [1, 2, 3]
    assert flicker.asked == [1, 2, 3, 2, 3, 4]


async def test_the_members_fast_path_reads_a_page_past_the_malls_left_as_the_end(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`GET /malls?include=stores` paged by the mirror's mall count: a mall deleted upstream
    leaves the last page past the end, and its 404 is the end of the walk, not a failure."""
    async with make_emulator(resources=300, seed=7, malls=3, hard=Hard(past_end_404=True)) as emu:
        emu.app.mall_includes = True
        settings = settings_for(emu, tmp_path / "m.db", types=["malls", "stores"])
        await run_backfill(settings)
        emu.delete("malls", emu.ids("malls")[-1])
        mirror = Mirror.open(settings.mirror.path)
        try:
            async with ChannelClient(settings.upstream) as client:
                members = MallIncludes(
                    client,
                    mirror,
                    Evidence(client, mirror),
                    [catalogue.TYPES["stores"]],
                    lambda: list(mirror.table("malls").ids()),
                    page_size=1,
                )
                await members.detect()
                assert members.pages() == 3
                await members.poll()
        finally:
            mirror.close()
        assert emu.requests.routes["/malls"] >= 3


async def test_a_refused_include_path_costs_only_itself_in_requests(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Articles behind `include_path_500` (`tags.tags`) and `nested_include_400`
    (`images.tags`): the backfill asks `/articles` within 3x the list pages it needs and no
    per-row route (the included images and tags carry that linkage); where `malls` and
    `products` are refused (`includes_allowed`), no include brings them: one request a row
    each in the backfill, and a reconcile with nothing changed asks none of them again (#47:
    before, every reconcile asked them all again)."""
    types = ["malls", "articles"]
    hard = Hard(include_path_500=True, nested_include_400=True)
    async with make_emulator(resources=1200, seed=5, malls=2, hard=hard) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=types, page_size=10)
        await run_backfill(settings)
        n = len(emu.ids("articles"))
        pages = -(-n // 10)
        routes = emu.requests.routes
        assert not [r for r in routes if r.startswith("/articles/{id}/")], dict(routes)
        assert routes["/articles"] <= 3 * pages, (routes["/articles"], pages)
        assert compare(settings.mirror.path, emu, types).differences == 0

        emu.hard.includes_allowed = ("images", "tags")
        settings = settings_for(emu, tmp_path / "n.db", types=types, page_size=10)
        emu.requests.reset()
        await run_backfill(settings)
        per_row = {r: c for r, c in emu.requests.routes.items() if r.startswith("/articles/{id}/")}
        assert per_row == {"/articles/{id}/malls": n, "/articles/{id}/products": n}, per_row
        assert compare(settings.mirror.path, emu, ["articles"]).differences == 0
        emu.requests.reset()
        mirror = Mirror.open(settings.mirror.path)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                await reconcile_every_type(
                    Reconciler(client, mirror, max_delete_share=None),
                    settings.upstream.mirrored_types(),
                )
        finally:
            mirror.close()
        again = [r for r in emu.requests.routes if r.startswith("/articles/{id}/")]
        assert again == [], dict(emu.requests.routes)
