"""No live row is ever lost: deletions on evidence only, versioned tombstones, pages read whole.

Each test here failed on the code before #29: the mirror deleted rows the upstream still held
(a short page read as proof, a move read as a deletion) or refused rows it created again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from sync.channel.client import ChannelClient
from sync.channel.clock import UpstreamClock
from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.emulator.hard import Hard
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.poll import Poller
from sync.jobs.malls.mallroutes import MallRoutes
from sync.jobs.proving.reconcile import Reconciler, reconcile_every_type
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.model.stamps import iso_ms, now_iso, shift
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from tests.support.backfilled import backfill, run_backfill
from tests.support.compare import compare, lost_rows, record_deletions, watch_deletions
from tests.support.pages import write_page
from tests.support.processes import spawn
from tests.support.settings import settings_for, upstream_keys, write_config

STAMP = "2026-01-01T00:00:00.000Z"


def _article(rid: int, stamp: str, title: str = "t") -> dict[str, Any]:
    return {"id": str(rid), "type": "articles", "attributes": {"title": title, "updated_at": stamp}}


def _page(n: int, number: int, last: int) -> Page:
    return Page([{"id": str(i)} for i in range(n)], [], {}, number, last, None)


# -- versioned tombstones ------------------------------------------------------------------------


def test_a_copy_stamped_after_the_deletion_wins_and_lifts_the_tombstone(tmp_path: Path) -> None:
    """Ids may be re-used upstream: a row created again after its deletion reaches the mirror;
    a copy made before the deletion (a page fetched before it, written after) still cannot."""
    m = Mirror.open(tmp_path / "m.db")
    articles = catalogue.TYPES["articles"]
    write_page(m, articles, [_article(1, STAMP)])
    m.table("articles").apply_feed({1: "2026-01-02T00:00:00.000Z"})
    write_page(m, articles, [_article(1, STAMP, "stale copy")])
    assert m.table("articles").get(1) is None
    write_page(m, articles, [_article(1, "2026-01-02T00:00:00.000Z", "same moment")])
    assert m.table("articles").get(1) is None
    write_page(m, articles, [_article(1, "2026-01-03T00:00:00.000Z", "created again")])
    row = m.table("articles").get(1)
    assert row is not None and row["title"] == "created again"
    assert m.table("articles").tombstones([1]) == {}
    m.close()


class _AnswersAbsentThenStalls:
    """A client whose `filter[id]` finds nothing, and whose answer reaches the caller a while
    after the upstream gave it (a busy event loop, a page write in between): the moment of the
    answer is what the tombstone may claim, not the moment it was read."""

    clock_offset = 0.0

    def __init__(self) -> None:
        self.answered_at = ""
        self.paging = Paging(100)
        self.clock = UpstreamClock()
        self.profile: Any = None

    def keep(self, store: Any) -> None:
        return None

    async def fetch_ids(self, scope: Any, ids: Any) -> Page:
        self.answered_at = iso_ms(time.time())
        await asyncio.sleep(0.2)
        return Page([], [], {}, 1, 1, None)


async def test_a_row_created_again_right_after_its_confirmed_deletion_is_not_refused(
    tmp_path: Path,
) -> None:
    """Ids may be re-used: a row created again just after `filter[id]` answered that it was
    gone, but before that answer was written, carries a stamp before the moment of the write.
    A confirmation is an inference and leaves no tombstone (only the feed's refuse older
    copies), so that copy wins."""
    m = Mirror.open(tmp_path / "m.db")
    articles = catalogue.TYPES["articles"]
    write_page(m, articles, [_article(1, STAMP)])
    client = _AnswersAbsentThenStalls()
    evidence = Evidence(client, m)
    assert await evidence.confirm_and_delete(scopes_of(articles, []), [1]) == 1
    created_again = shift(client.answered_at, 0.05)  # after the answer, before the write
    write_page(m, articles, [_article(1, created_again, "created again")])
    row = m.table("articles").get(1)
    assert row is not None and row["title"] == "created again"
    m.close()


def test_a_stampless_tombstone_holds_only_for_a_while(tmp_path: Path) -> None:
    """Tags carry no `updated_at`: a copy right after the deletion is refused, one long after
    (a tag created again under the same id) is taken."""
    m = Mirror.open(tmp_path / "m.db")
    tag = {"id": "5", "type": "tags", "attributes": {"name": "x"}}
    article = _article(1, STAMP)
    article["relationships"] = {"tags": {"data": [{"type": "tags", "id": "5"}]}}
    write_page(m, catalogue.TYPES["articles"], [article], [tag])
    m.table("tags").apply_feed({5: now_iso()})
    write_page(m, catalogue.TYPES["articles"], [article], [tag])
    assert m.table("tags").get(5) is None
    m.conn.execute("UPDATE _sync_tombstones SET deleted_at = '2020-01-01T00:00:00.000Z'")
    write_page(m, catalogue.TYPES["articles"], [article], [tag])
    assert m.table("tags").get(5) is not None
    m.close()


async def test_a_reused_id_reaches_the_mirror_through_the_poll(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The deletions feed is applied, then the upstream creates a row under the same id: the
    next poll brings it in (it was dropped for good by the tombstone before)."""
    async with make_emulator(resources=400, seed=3) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        rid = emu.ids("articles")[5]
        emu.delete("articles", rid)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            await poller.poll_deletions({"articles"})
            assert mirror.table("articles").get(int(rid)) is None
            # The same id, created again (MySQL re-uses ids after a restart).
            rec = emu.data.by_type["articles"].get(int(rid))
            assert rec is None
            emu.data.next_id["articles"], saved = int(rid), emu.data.next_id["articles"]
            emu.create("articles", {"title": "born again"})
            emu.data.next_id["articles"] = saved
            (scope,) = scopes_of(catalogue.TYPES["articles"], [])
            await poller.poll_scope(scope)
            row = mirror.table("articles").get(int(rid))
        mirror.close()
        assert row is not None and row["title"] == "born again"
        assert compare(db, emu, ["articles"]).differences == 0


# -- the one stop rule ---------------------------------------------------------------------------


def test_a_full_page_is_never_the_end_whatever_links_last_says() -> None:
    p = Paging(100)
    assert p.more(_page(100, 3, 3))  # links.last says 3, but the page is full
    assert not p.more(_page(99, 3, 3))
    assert not p.more(_page(0, 4, 9))  # an empty page ends any walk


def test_a_short_page_before_links_last_teaches_the_served_size() -> None:
    p = Paging(100)
    assert p.more(_page(30, 1, 4))  # short, yet more pages follow: the upstream caps at 30
    assert p.served == 30 and p.size == 30
    assert p.more(_page(30, 4, 4))  # full at the served size: ask past links.last
    assert not p.more(_page(29, 5, 5))


def test_a_refused_page_size_is_asked_smaller_and_kept() -> None:
    p = Paging(100)
    assert p.refused() and p.asked == 25
    assert p.refused() and p.asked == 12
    q = Paging(100)
    q.load(p.dump())
    assert q.asked == 12


# -- sideloads in the deletions feed ---------------------------------------------------------------


async def test_the_deletions_poll_applies_image_and_tag_entries_with_their_links(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Images and tags have no list route; the feed lists their deletions all the same."""
    async with make_emulator(resources=400, seed=5) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        mirror = Mirror.open(db)
        linked = mirror.conn.execute("SELECT images_id FROM articles_images LIMIT 1").fetchone()[0]
        emu.delete("images", linked)
        async with ChannelClient(settings.upstream) as client:
            await Poller(client, mirror, page_size=100, overlap=0.0).poll_deletions({"articles"})
        assert mirror.table("images").get(int(linked)) is None
        left = mirror.conn.execute(
            "SELECT count(*) FROM articles_images WHERE images_id = ?", (linked,)
        ).fetchone()[0]
        mirror.close()
        assert left == 0


# -- memberships and moves -------------------------------------------------------------------------


async def test_a_store_moved_without_a_new_stamp_is_moved_not_deleted(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The old mall no longer lists it, the new one does, `updated_at` is unchanged: one
    reconcile moves its membership, and no live row is deleted on the way."""
    async with make_emulator(resources=900, seed=9) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["stores", "products"])
        deleted = record_deletions(emu)
        watch_deletions(db)
        d = emu.data
        malls = d.order["malls"]
        moved = 0
        for t in ("stores", "products"):
            for rid in list(d.order[t])[:6]:
                target = next(m for m in malls if m != d.by_type[t][rid].mall)
                emu.silent_update(t, rid, mall_id=target)  # same `updated_at`, no notice
                moved += 1
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            reconciler = Reconciler(client, mirror, max_delete_share=0.5)
            result = await reconcile_every_type(reconciler, settings.upstream.mirrored_types())
        mirror.close()
        assert result.refusals == []
        assert lost_rows(db, emu, deleted, ["stores", "products"]) == []
        c = compare(db, emu, ["stores", "products"])
        assert c.differences == 0, c.summary()
        assert c.memberships_compared > 0 and moved == 12


async def test_a_mall_gone_from_its_routes_is_a_fact_not_a_failure(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`types = ["stores"]` without malls: a mall deleted upstream answers 404 on its routes;
    the reconcile drops its memberships and hours, removes the stores no mall lists (gone from
    `filter[id]` too), carries on with the other malls, and reports no failure."""
    async with make_emulator(resources=900, seed=13) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["stores"])
        mall = emu.data.order["malls"][0]
        mirror = Mirror.open(db)
        had_hours = mirror.conn.execute(
            "SELECT count(*) FROM hours WHERE mall_id = ?", (mall,)
        ).fetchone()[0]
        mirror.close()
        assert had_hours
        emu.delete("malls", mall)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            reconciler = Reconciler(client, mirror, max_delete_share=None)
            result = await reconcile_every_type(reconciler, settings.upstream.mirrored_types())
        hours = mirror.conn.execute(
            "SELECT count(*) FROM hours WHERE mall_id = ?", (mall,)
        ).fetchone()[0]
        members = mirror.conn.execute(
            "SELECT count(*) FROM malls_stores WHERE malls_id = ?", (mall,)
        ).fetchone()[0]
        mirror.close()
        assert result.refusals == [] and mall in result.malls_gone
        assert hours == 0 and members == 0
        c = compare(db, emu, ["stores"])
        assert c.differences == 0, c.summary()


async def test_forged_deletion_notices_never_delete_a_live_row(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A deletion notice is a hint: `filter[id]` over every page decides."""
    async with make_emulator(resources=2000, seed=17) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        ids = [int(i) for i in emu.ids("articles")[:100]]
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            evidence = Evidence(client, mirror)
            removed = await evidence.confirm_and_delete(
                scopes_of(catalogue.TYPES["articles"], []), ids
            )
        mirror.close()
        assert removed == 0
        assert compare(db, emu, ["articles"]).differences == 0


@pytest.mark.parametrize("bound", [30, 50])
async def test_pages_capped_below_the_ask_are_read_whole(
    make_emulator: Any, tmp_path: Path, bound: int
) -> None:
    """An upstream whose page bound is lower than asked ("subject to change"): forged notices
    delete nothing, every change reaches the poll, the backfill and reconcile are exact."""
    async with make_emulator(resources=2000, seed=19) as emu:
        emu.hard.page_bound = bound
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        assert compare(db, emu, ["articles"]).differences == 0
        ids = [int(i) for i in emu.ids("articles")[:100]]
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            removed = await Evidence(client, mirror).confirm_and_delete(
                scopes_of(catalogue.TYPES["articles"], []), ids
            )
            assert removed == 0
            for rid in ids[:90]:
                emu.update("articles", rid)
            created = [emu.create("articles") for _ in range(5)]
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(catalogue.TYPES["articles"], [])
            result = await poller.poll_scope(scope)
            assert client.session.paging.served == bound
        mirror.close()
        assert result.rows >= 95 and created
        c = compare(db, emu, ["articles"])
        assert c.differences == 0, c.summary()


# -- contacts and deals by their mall routes -------------------------------------------------------


async def test_the_deal_derivation_is_checked_against_the_routes_and_dropped_when_wrong(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`malls_deals` is derived by a rule the spec never states: kept while the mall routes
    agree with it, replaced by the routes' own lists as soon as one disagrees."""
    async with make_emulator(resources=900, seed=23) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["stores", "deals"])
        mirror = Mirror.open(db)
        assert MallRoutesMeta(mirror).get("deals") == "unchecked"  # the backfill does not list
        assert mirror.schema.has_view("malls_deals")
        async with ChannelClient(settings.upstream) as client:
            await MallRoutes(client, mirror).refresh(["deals"], list(mirror.table("malls").ids()))
        assert MallRoutesMeta(mirror).get("deals") == "derived"
        mirror.close()
        assert compare(db, emu, ["stores", "deals"]).differences == 0
        # The upstream's rule is another: each mall lists three deals of its own choosing.
        d = emu.data
        chosen = {m: d.order["deals"][i : i + 3] for i, m in enumerate(d.order["malls"])}
        d.mall_deals = lambda mall: sorted(chosen.get(mall, []))  # type: ignore[method-assign]
        d.version["deals"] += 1
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            reconciler = Reconciler(client, mirror, max_delete_share=None)
            await reconcile_every_type(reconciler, settings.upstream.mirrored_types())
        assert MallRoutesMeta(mirror).get("deals") == "route"
        assert not mirror.schema.has_view("malls_deals")
        mirror.close()
        c = compare(db, emu, ["stores", "deals"])
        assert c.differences == 0, c.summary()


async def test_deals_without_store_linkage_take_their_malls_from_the_routes(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`deals_without_stores`: no deal serves `stores` linkage, so the rule has nothing to derive
    from (and its check nothing to compare). The mall routes fill `malls_deals`, after the
    backfill and after a reconcile, and `ccsync status` says so, never agreement (#37)."""
    async with make_emulator(resources=600, seed=23, hard=Hard(deals_without_stores=True)) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["stores", "deals"])
        mirror = Mirror.open(db)
        assert MallRoutesMeta(mirror).get("deals") == "route"
        mirror.close()
        c = compare(db, emu, ["stores", "deals"])
        assert c.differences == 0 and c.links_compared, c.summary()
        assert "malls_deals: listed from GET /malls/{id}/deals: no deal serves stores linkage" in (
            status_lines(status_data(db))
        )
        emu.create("deals", {"is_local": False, "visibility": "Public"})
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            reconciler = Reconciler(client, mirror, max_delete_share=None)
            await reconcile_every_type(reconciler, settings.upstream.mirrored_types())
        assert MallRoutesMeta(mirror).get("deals") == "route"
        mirror.close()
        c = compare(db, emu, ["stores", "deals"])
        assert c.differences == 0, c.summary()
    # Where the rule is checked, status names how many malls' routes it was checked against.
    async with make_emulator(resources=600, seed=23) as emu:
        db = tmp_path / "n.db"
        settings = await backfill(emu, db, types=["stores", "deals"])
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await MallRoutes(client, mirror).refresh(["deals"], list(mirror.table("malls").ids()))
        mirror.close()
        (line,) = [x for x in status_lines(status_data(db)) if x.startswith("malls_deals")]
        assert line.startswith("malls_deals: derived by a rule: checked against 3 malls' routes")
        assert line.endswith(": agreed")


def test_a_derivation_agreed_with_nothing_is_checked_again(tmp_path: Path) -> None:
    """A mirror written before #37 may say `derived` with no view to derive from: the daemon
    takes that as unproven and checks it beside its first jobs."""
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        routes = MallRoutes(None, mirror)  # type: ignore[arg-type]
        mirror.meta.set("mall_routes", '{"deals": "derived"}')
        assert routes.deals_unproven()
        mirror.meta.set("mall_routes", '{"deals": "route"}')
        assert not routes.deals_unproven()
    finally:
        mirror.close()


def MallRoutesMeta(mirror: Mirror) -> dict[str, str]:
    import orjson

    from sync.jobs.malls.mallroutes import META_KEY

    return dict(orjson.loads(mirror.meta.get(META_KEY) or "{}"))


# -- the emulator's hard readings, one at a time ----------------------------------------------------


async def test_rows_in_several_malls_keep_every_membership(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`multi_mall`: a product sold in three malls is listed by three mall routes; the mirror
    holds the three pairs (one `mall_id` per row kept only the last)."""
    async with make_emulator(resources=1500, seed=29, malls=6) as emu:
        emu.hard.multi_mall = True
        db = tmp_path / "m.db"
        await backfill(emu, db, types=["stores", "products", "programs"])
        c = compare(db, emu, ["stores", "products", "programs"])
        several = sum(
            len(emu.data.malls_of(t, int(i))) > 1
            for t in ("stores", "products")
            for i in emu.ids(t)
        )
        assert several > 10
        assert c.differences == 0, c.summary()


async def test_a_mall_deleted_alone_takes_its_members_at_the_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`mall_delete_alone`: the feed lists the mall and nothing else; its members vanish from
    every listing. The feed deletes the mall, the reconcile removes the rows no other mall
    lists (confirmed by `filter[id]` in every mall), and nothing another mall lists is lost."""
    async with make_emulator(resources=1500, seed=31, malls=6) as emu:
        emu.hard.multi_mall = True
        emu.hard.mall_delete_alone = True
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["malls", "stores", "products"])
        deleted = record_deletions(emu)
        watch_deletions(db)
        emu.delete("malls", emu.ids("malls")[2])
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Poller(client, mirror, page_size=100, overlap=0.0).poll_deletions(
                {"malls", "stores", "products"}
            )
            result = await reconcile_every_type(
                Reconciler(client, mirror, max_delete_share=None),
                settings.upstream.mirrored_types(),
            )
        mirror.close()
        assert result.refusals == []
        assert lost_rows(db, emu, deleted, ["malls", "stores", "products"]) == []
        c = compare(db, emu, ["malls", "stores", "products"])
        assert c.differences == 0, c.summary()


async def test_a_backfill_whose_listings_shift_misses_no_row_that_never_changed(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`shifting_listings`: rows leave a listing while it is walked (a deal made Private), so
    later rows move to earlier pages. The backfill sees the changes and runs the missed-row
    pass: every row that did not change is in the mirror when it exits."""
    async with make_emulator(resources=3000, seed=37) as emu:
        before = {t: set(emu.ids(t)) for t in ("deals", "articles", "events")}
        emu.hard.shifting_listings = True
        db = tmp_path / "m.db"
        await backfill(emu, db, types=["deals", "articles", "events"])
        assert emu.data.shifted > 0
        changed = {(t, str(i)) for t in before for i in before[t]} - {
            (t, str(i)) for t in before for i in emu.ids(t)
        }
        c = compare(db, emu, ["deals", "articles", "events"])
        missing = {(t, i) for t, ids in c.missing.items() for i in ids}
        assert not missing - changed, sorted(missing - changed)[:10]


async def test_a_backfill_whose_mall_listings_shift_ends_exact_or_fails(
    make_emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`shifting_listings` on mall routes: stores leave `/malls/{id}/stores` while it is walked
    (moved silently to another mall: no new stamp, no feed entry), so later stores move to
    earlier pages and one is skipped. The missed-row pass covers the mall listings walked over
    several pages, again until a pass sees the listing hold still: once the upstream stops
    shifting, the mirror ends exact, memberships included; while it never does, `ccsync
    backfill` exits 1 naming the malls, and no store that never moved is missing (#37)."""
    from sync.emulator import listings

    async with make_emulator(resources=600, seed=41, malls=2) as emu:
        stores = {m: set(emu.ids("stores", mall_id=m)) for m in emu.ids("malls")}
        emu.hard.shifting_listings = True
        # The upstream shifts once, under the walk (no page comes short, no `links.last`
        # moves, no feed entry: only the pages' ETags show it), then holds still.
        original = listings.shifting.before_page

        def once(data: Any, *args: Any) -> str | None:
            return original(data, *args) if data.shifted < 1 else None

        monkeypatch.setattr(listings.shifting, "before_page", once)
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["stores"], page_size=25)
        report = await run_backfill(settings)
        assert emu.data.shifted == 1 and not report.types["stores"].unsettled
        c = compare(db, emu, ["malls", "stores"])
        assert c.differences == 0, c.summary()
        # An upstream that shifts under every pass (five pages a mall): the backfill says so
        # and exits 1.
        monkeypatch.setattr(listings.shifting, "before_page", original)
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream=upstream_keys(emu, "TEST_SYNC_PW", types=["stores"], page_size=10),
            mirror={"path": tmp_path / "n.db"},
        )
        proc = await spawn(
            "backfill", "--quiet", "--config", str(cfg), env={"TEST_SYNC_PW": emu.password}
        )
        _, err = await proc.communicate()
        assert proc.returncode == 1 and b"kept changing" in err, err.decode()
        moved = {s for m, ids in stores.items() for s in ids - set(emu.ids("stores", mall_id=m))}
        c = compare(tmp_path / "n.db", emu, ["stores"])
        assert not set(c.missing["stores"]) - {str(s) for s in moved}


async def test_a_still_mall_listing_costs_one_revalidation_a_page(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Nothing moves: each mall listing of several pages is asked again page by page but the
    last, with `If-None-Match` (304s, no body), and no missed-row pass runs (#37)."""
    async with make_emulator(resources=600, seed=41, malls=2) as emu:
        sizes = [len(emu.ids("stores", mall_id=m)) for m in emu.ids("malls")]
        emu.requests.reset()
        report = await run_backfill(
            settings_for(emu, tmp_path / "m.db", types=["stores"], page_size=25)
        )
        pages = [-(-n // 25) for n in sizes]
        past = sum(n % 25 == 0 for n in sizes)  # a full last page: the next one is asked too
        assert min(pages) > 1 and report.types["stores"].repaired == 0, sizes
        assert emu.requests.routes["/malls/{id}/stores"] == sum(2 * p - 1 for p in pages) + past
