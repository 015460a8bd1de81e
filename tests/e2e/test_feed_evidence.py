"""Feed entries are dated evidence; absence is not deletion (#37 items 4 and 5, #38 item 4).

Only the deletions feed writes tombstones, and an entry deletes a row only if the mirrored row
is not newer than the entry. A row removed on inference (confirmed gone by `filter[id]`, dropped
by every "current" list) leaves nothing that keeps it out: listed again, even under its old
stamp, it is back after one reconcile. Each test failed on the code before: the feed deleted rows
created again, and confirmations tombstoned rows that were only out of sight.
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.jobs.incremental.feed import FeedEntries, unknown_types
from sync.jobs.incremental.poll import Poller
from sync.jobs.proving.proof import run_proof_cycle
from sync.jobs.proving.reconcile import run_reconcile
from sync.model import catalogue
from sync.model.catalogue import normalize_type
from sync.model.scopes import scopes_of
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.compare import compare
from tests.support.pages import write_page
from tests.support.settings import settings_for

ROOT = Path(__file__).resolve().parents[2]
ARTICLES = catalogue.TYPES["articles"]
DEALS = catalogue.TYPES["deals"]
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _article(rid: int, stamp: str, title: str = "t") -> dict[str, Any]:
    return {"id": str(rid), "type": "articles", "attributes": {"title": title, "updated_at": stamp}}


def _entries(*rows: tuple[str, str, Any, str | None]) -> Page:
    """A feed page of (entry id, resource_type, resource_id, created_at)."""
    return Page(
        [
            {
                "id": eid,
                "type": "deletions",
                "attributes": {"resource_type": t, "resource_id": rid, "created_at": at},
            }
            for eid, t, rid, at in rows
        ],
        [],
        {},
        1,
        1,
        None,
    )


def _held(db: Path, type_name: str, ids: list[int]) -> list[int]:
    mirror = Mirror.open(db, readonly=True)
    try:
        return [i for i in ids if mirror.table(type_name).get(i) is not None]
    finally:
        mirror.close()


# -- the store: an entry against the row it names -------------------------------------------------


def test_an_entry_removes_a_row_not_newer_and_keeps_a_row_created_again(tmp_path: Path) -> None:
    """Older: deleted and tombstoned at the entry's moment. Newer: the id created again, kept.
    Equal: no evidence either way, left untombstoned for `filter[id]` (`FeedApplied.tied`). An
    entry without `created_at` is no evidence against a stamped row."""
    m = Mirror.open(tmp_path / "m.db")
    write_page(m, ARTICLES, [_article(1, T0), _article(2, T1), _article(3, T2), _article(5, T0)])
    done = m.table("articles").apply_feed({1: T1, 2: T1, 3: T1, 4: T1, 5: None})
    assert (done.removed, done.kept, done.tied, done.unstamped) == (1, [3], [2], 1)
    assert [i for i in (1, 2, 3, 4, 5) if m.table("articles").get(i)] == [2, 3, 5]
    assert set(m.table("articles").tombstones([1, 2, 3, 4, 5])) == {1, 3, 4}
    write_page(m, ARTICLES, [_article(1, T0, "a copy from before the deletion")])
    assert m.table("articles").get(1) is None  # the feed's tombstone refuses older copies
    m.close()


def test_an_inferred_deletion_leaves_no_tombstone(tmp_path: Path) -> None:
    m = Mirror.open(tmp_path / "m.db")
    write_page(m, ARTICLES, [_article(1, T1)])
    assert m.table("articles").delete([1]) == 1
    assert m.table("articles").tombstones([1]) == {}
    write_page(m, ARTICLES, [_article(1, T0, "listed again with an old stamp")])
    assert m.table("articles").get(1) is not None
    m.close()


# -- the daemon's polls against the emulator ------------------------------------------------------


@pytest.mark.parametrize("count", [1, 20])
async def test_ids_created_again_before_the_deletions_poll_stay(
    make_emulator: Any, tmp_path: Path, count: int
) -> None:
    """Delete ids and create them again at once (new stamps later than their entries); the
    type poll writes the new rows before the deletions poll reads the entries: all stay."""
    async with make_emulator(resources=150, seed=3) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        ids = [int(i) for i in emu.ids("articles")[:count]]
        for rid in ids:
            emu.data.recreate("articles", rid)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(ARTICLES, [])
            await poller.poll_scope(scope)
            await poller.poll_deletions({"articles"})
        present = [rid for rid in ids if mirror.table("articles").get(rid) is not None]
        mirror.close()
        assert present == ids
        assert compare(db, emu, ["articles"]).differences == 0


async def test_a_row_created_again_before_the_deletions_poll_leaves_its_old_owners(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A contact some stores link, deleted and created again at once: the deletion took it out
    of those stores' linkage (their stamps unmoved), the contacts poll writes the new row, and
    the deletions poll keeps it (newer than its entry) and asks the stores again: the mirror's
    linkage is the upstream's, with no reconcile (the strict chaos suite found the stale links)."""
    types = ["malls", "stores", "contacts"]
    async with make_emulator(resources=300, seed=5) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=types)
        mirror = Mirror.open(db)
        linked = mirror.conn.execute(
            "SELECT contacts_id, count(*) FROM stores_contacts GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
        ).fetchone()
        assert linked is not None, "no store links a contact: the test proves nothing"
        contact = int(linked[0])
        emu.data.recreate("contacts", contact)
        async with ChannelClient(settings.upstream) as client:
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(catalogue.TYPES["contacts"], [])
            await poller.poll_scope(scope)
            await poller.poll_deletions(set(types))
        mirror.close()
        assert _held(db, "contacts", [contact]) == [contact]
        result = compare(db, emu, types)
        assert result.differences == 0, result.summary()


@pytest.mark.parametrize("type_name", ["articles", "stores"])
async def test_a_row_created_again_in_the_second_of_its_deletion_is_back_after_the_feed(
    make_emulator: Any, tmp_path: Path, type_name: str
) -> None:
    """Stamps of whole seconds: a row deleted, its feed entry applied (tombstone at second T),
    then created again within second T, so its stamp is T too. A tombstone refused a copy
    stamped its very moment: polls, the reconcile and the proof all met it, a live row lost
    for good. Now `filter[id]` decides: served, it is written, after a poll cycle and after one
    reconcile (a mall-scoped row in the mall that listed it)."""
    types = ["malls", type_name]
    async with make_emulator(resources=300, seed=6) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=types)
        emu.hard.whole_second_stamps = True
        rid = int(emu.ids(type_name)[3])
        mall = emu.data.by_type[type_name][rid].mall
        for _ in range(20):  # the deletion, the feed read and the creation in one second
            entry = emu.data.delete(type_name, rid)
            mirror = Mirror.open(db)
            async with ChannelClient(settings.upstream) as client:
                poller = Poller(client, mirror, page_size=100, overlap=0.0)
                await poller.poll_deletions(set(types))
            mirror.close()
            created = emu.data.create(type_name, mall=mall, rid=rid)
            if created.decoded()["updated_at"] == entry.decoded()["created_at"]:
                break
        else:
            pytest.fail("never created again within the second of its deletion")
        assert _held(db, type_name, [rid]) == []
        with capture_logs() as events:
            _, unresolved = await run_proof_cycle(settings)  # `ccsync reconcile`
        assert unresolved == [] and _held(db, type_name, [rid]) == [rid]
        assert compare(db, emu, types).differences == 0
        # Served by the proof's filter[id] after the tombstone was written: taken, lifted.
        lifted = [e for e in events if e["event"] == "tombstone.lifted"]
        assert lifted and rid in lifted[0]["ids"]


# -- the reconcile: absence is not deletion -------------------------------------------------------


async def test_a_confirmed_deletion_listed_again_with_its_old_stamp_is_back_after_a_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=150, seed=4) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        rid = int(emu.ids("articles")[7])
        emu.hard.current_lists_drop = True
        emu.data.hide("articles", rid, 3600.0)  # out of every listing and filter[id]
        await run_reconcile(settings)
        assert _held(db, "articles", [rid]) == []  # confirmed gone by filter[id]
        emu.hard.current_lists_drop = False  # listed again, its stamp unchanged
        await run_reconcile(settings)
        assert compare(db, emu, ["articles"]).differences == 0


async def test_a_press_release_dropped_by_every_current_list_is_back_after_a_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=150, seed=5, malls=3) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["malls", "press_releases"])
        rids = [int(i) for i in emu.ids("press_releases")[:3]]
        emu.hard.current_lists_drop = True
        for rid in rids:
            emu.data.hide("press_releases", rid, 3600.0)
        await run_reconcile(settings)
        assert _held(db, "press_releases", rids) == []  # listed by no mall, nor filter[id]
        emu.hard.current_lists_drop = False
        await run_reconcile(settings)
        assert compare(db, emu, ["press_releases"]).differences == 0


async def test_a_mirror_of_the_previous_version_drops_its_tombstones(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`tests/data/mirror-6b2c21e.db.gz` with a tombstone the previous version wrote for a row
    it only inferred gone (dated after the row's stamp): this version cannot tell it from the
    feed's, drops it on open, and the reconcile brings the row back."""
    db = tmp_path / "mirror.db"
    db.write_bytes(gzip.decompress((ROOT / "tests" / "data" / "mirror-6b2c21e.db.gz").read_bytes()))
    conn = sqlite3.connect(db)
    rid = conn.execute("SELECT min(id) FROM deals").fetchone()[0]
    conn.execute("DELETE FROM deals WHERE id = ?", (rid,))
    conn.execute(
        "INSERT INTO _sync_tombstones VALUES ('deals', ?, '2999-01-01T00:00:00.000Z')", (rid,)
    )
    conn.commit()
    conn.close()
    mirror = Mirror.open(db)
    assert mirror.table("deals").tombstones([rid]) == {}
    cols = [r[1] for r in mirror.conn.execute("PRAGMA table_info(_sync_tombstones)")]
    mirror.close()
    assert cols[-1] == "source"
    async with make_emulator(resources=150, seed=3) as emu:
        await run_reconcile(settings_for(emu, db))
        assert compare(db, emu, ["deals"]).differences == 0


# -- resource_type: mapped, or logged, counted and shown ------------------------------------------


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("i-features", "ifeatures"),
        ("job listings", "job_listings"),
        ("Job Listings", "job_listings"),
        ("JobListing", "job_listings"),
        ("IFeature", "ifeatures"),
        ("PressRelease", "press_releases"),
        ("Deal", "deals"),
        ("mall_message", "mall_messages"),
        ("JOB_LISTINGS", "job_listings"),
        ("social-feeds", "social_feeds"),
        ("coupons", None),
    ],
)
def test_the_spec_s_own_spellings_map(raw: str, name: str | None) -> None:
    assert normalize_type(raw) == name


def test_an_unknown_resource_type_is_logged_once_counted_and_shown(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    m = Mirror.open(db)
    write_page(m, ARTICLES, [_article(1, T0), _article(2, T0)])
    counted: list[tuple[str, int]] = []
    feed = FeedEntries(m, {"articles"}, on_unknown=lambda n, k: counted.append((n, k)))
    page = _entries(
        ("1", "coupon-37", 1, T1),
        ("2", "coupon-37", 2, T1),
        ("3", "coupon-37", 3, T1),
        ("4", "i-features", 9, T1),
        ("5", "job listings", 9, T1),
        ("6", "Article", 2, T1),
    )
    with capture_logs() as logs:
        feed.apply(page)
        feed.apply(page)  # the feed's overlap reads the same entries again: counted once
        feed.apply(_entries(("7", "coupon-37", 4, T1)))
    warned = [e for e in logs if e["event"] == "deletions.unknown_resource_type"]
    assert [e["resource_type"] for e in warned] == ["coupon-37"]
    assert counted == [("coupon-37", 3), ("coupon-37", 1)]
    assert m.table("articles").get(1) is not None and m.table("articles").get(2) is None
    assert unknown_types(m) == {"coupon-37": 4}
    m.close()
    lines = status_lines(status_data(db))
    assert "deletions feed: 4 entries of unknown resource_type 'coupon-37' (skipped)" in lines


async def test_an_unknown_type_in_the_feed_makes_the_backfill_run_its_missed_row_pass(
    make_emulator: Any, tmp_path: Path
) -> None:
    """An entry whose type maps to nothing may be this type's: the pass runs (it was skipped)."""
    from sync.emulator.records import Rec
    from sync.jobs.backfilling.missedrows import MissedRows

    async with make_emulator(resources=100, seed=6) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        mirror = Mirror.open(db)
        started = emu.data.fresh_stamp(None)  # as if a backfill started now
        async with ChannelClient(settings.upstream) as client:
            missed = MissedRows(client, mirror)
            assert not await missed.needed(ARTICLES, started)
            did = emu.data.next_id["deletions"]
            emu.data.next_id["deletions"] += 1
            stamp = emu.data.fresh_stamp(None)
            attrs = {"resource_id": 1, "resource_type": "coupon-37", "created_at": stamp}
            emu.data.add(Rec("deletions", did, {**attrs, "updated_at": stamp}))
            assert await missed.needed(ARTICLES, started)
        mirror.close()


# -- #46: one standard of evidence, a window around the entry ---------------------------------


async def test_a_deal_created_again_stamped_before_its_entry_survives_the_feed_and_the_proof(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A deal deleted and created again at once by an app server whose clock is behind the
    feed's (`recreated_before_entry`): the live row is stamped up to a second *before* its
    entry. Its notice writes it; the feed's poll then read `updated_at < created_at` as older,
    deleted it and tombstoned it for good while the proof reported it repaired. Within the
    window `filter[id]` decides: it stays through the feed's poll and `ccsync reconcile`."""
    from sync.jobs.evidence import Evidence

    async with make_emulator(resources=400, seed=9) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["deals"])
        emu.hard.recreated_before_entry = True
        recs = emu.data.by_type["deals"]
        rid = next(i for i in emu.data.order["deals"] if recs[i].get("visibility") == "Public")
        fresh = emu.data.recreate("deals", rid)
        assert (
            fresh.decoded()["updated_at"]
            < emu.data.by_type["deletions"][max(emu.data.by_type["deletions"])].decoded()[
                "created_at"
            ]
        )
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            # The notice, as the queue worker fetches it.
            await Evidence(client, mirror).fetch_and_write(scopes_of(DEALS, []), [rid])
            assert mirror.table("deals").get(rid) is not None
            await Poller(client, mirror, page_size=100, overlap=0.0).poll_deletions({"deals"})
            assert mirror.table("deals").get(rid) is not None
        mirror.close()
        _, unresolved = await run_proof_cycle(settings)  # `ccsync reconcile`
        assert unresolved == [] and _held(db, "deals", [rid]) == [rid]
        assert compare(db, emu, ["deals"]).differences == 0


async def test_150_rows_deleted_and_created_again_in_one_second_stay_and_the_feed_moves_on(
    make_emulator: Any, tmp_path: Path
) -> None:
    """An import deletes and creates again 150 articles within one whole second (rows and
    entries share the stamp), and the polls read them before the feed: the feed's 150 ties
    are asked 100 ids a request (unchunked, 101 ties stalled the feed: `fetch_ids` refused
    them), all 150 stay, and deletions made after are applied by the next poll."""
    import time as clock

    async with make_emulator(resources=1200, seed=12) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        emu.hard.whole_second_stamps = True
        ids = [int(i) for i in emu.ids("articles")[:155]]
        recreated, later = ids[:150], ids[150:]
        for _ in range(5):
            clock.sleep(1.0 - clock.time() % 1.0 + 0.01)  # the start of a second
            stamps = set()
            for rid in recreated:
                entry = emu.data.delete("articles", rid)
                row = emu.data.create("articles", rid=rid)
                stamps |= {entry.decoded()["created_at"], row.decoded()["updated_at"]}
            if len(stamps) == 1:
                break
        else:
            pytest.fail("could not delete and create 150 rows within one second")
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                poller = Poller(client, mirror, page_size=100, overlap=0.0)
                (scope,) = scopes_of(ARTICLES, [])
                await poller.poll_scope(scope)  # the polls first: the rows are written
                await poller.poll_deletions({"articles"})
                assert [i for i in recreated if mirror.table("articles").get(i) is None] == []
                for rid in later:
                    emu.delete("articles", rid)
                await poller.poll_deletions({"articles"})
                assert [i for i in later if mirror.table("articles").get(i) is not None] == []
        finally:
            mirror.close()
        assert compare(db, emu, ["articles"]).differences == 0
