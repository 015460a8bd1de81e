"""Incremental polls cost what changed, not the mirror's size; reconcile repairs and refuses mass deletes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.core.config import Settings
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.incremental.poll import Poller
from sync.jobs.proving.reconcile import MassDeleteRefused, Reconciler, group_by_mall
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.settings import settings_for as shared_settings_for


def settings_for(emu: Emulator, db: Path, **up: Any) -> Settings:
    return shared_settings_for(
        emu, db, **{"types": ["articles", "deals"], "max_backoff": 0.05, **up}
    )


class Counting:
    """Counts listing requests made through a client."""

    def __init__(self, client: ChannelClient) -> None:
        self.calls = 0
        original = client.list_page

        async def list_page(*args: Any, **kwargs: Any) -> Page:
            self.calls += 1
            return await original(*args, **kwargs)

        client.list_page = list_page  # type: ignore[method-assign]


@pytest.mark.parametrize("k", [0, 1, 10, 150, 250])
async def test_incremental_poll_requests_grow_with_changes_not_size(
    make_emulator: Any, tmp_path: Path, k: int
) -> None:
    async with make_emulator(resources=5000, seed=11) as emu:
        db = tmp_path / "m.db"
        settings = settings_for(emu, db)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            ids = emu.ids("articles")
            assert len(ids) > 250
            for rid in ids[:k]:
                emu.update("articles", rid)
            counter = Counting(client)
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(catalogue.TYPES["articles"], [])
            result = await poller.poll_scope(scope)
        mirror.close()
        assert counter.calls <= math.ceil(k / 100) + 1, (k, counter.calls)
        assert result.rows >= k
        assert compare(db, emu, ["articles"]).differences == 0


async def test_poll_with_equal_stamps_longer_than_a_page(
    make_emulator: Any, tmp_path: Path
) -> None:
    """More than a page of rows sharing one updated_at are all read (walked by page number)."""
    async with make_emulator(resources=3000, seed=12) as emu:
        db = tmp_path / "m.db"
        settings = settings_for(emu, db)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            stamp = "2027-01-01T00:00:00.000Z"
            for rid in emu.ids("articles")[:230]:
                emu.update("articles", rid, {"title": "same second", "updated_at": stamp})
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(catalogue.TYPES["articles"], [])
            await poller.poll_scope(scope)
            # Those stamps lie in the future: the cursor must not jump past now, or this
            # change (stamped now) would be skipped by every later poll.
            assert (mirror.cursors.get("articles", "") or "") < stamp
            late = emu.ids("articles")[-1]
            emu.update("articles", late, {"title": "after the future stamps"})
            await poller.poll_scope(scope)
        mirror.close()
        assert compare(db, emu, ["articles"]).differences == 0


async def test_reconcile_repairs_and_the_guard_refuses_a_mass_delete(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=2000, seed=13) as emu:
        db = tmp_path / "m.db"
        settings = settings_for(emu, db)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            # Lost changes: an update, a create and a delete the mirror never heard of.
            emu.update("deals", emu.ids("deals")[0], {"title": "lost update"})
            emu.create("deals", {"title": "lost create"})
            emu.delete("deals", emu.ids("deals")[1])
            reconciler = Reconciler(client, mirror, max_delete_share=0.2)
            for group in group_by_mall(scopes_of(catalogue.TYPES["deals"], [])):
                result = await reconciler.reconcile(group)
            assert result.fetched == 2 and result.removed == 1
            assert compare(db, emu, ["deals"]).differences == 0
            # An upstream glitch: most articles vanish from the listing.
            before = mirror.table("articles").count()
            for rid in emu.ids("articles")[: int(before * 0.6)]:
                emu.delete("articles", rid)
            with pytest.raises(MassDeleteRefused, match="nothing was deleted"):
                for group in group_by_mall(scopes_of(catalogue.TYPES["articles"], [])):
                    await reconciler.reconcile(group)
            assert mirror.table("articles").count() == before
            forced = Reconciler(client, mirror, max_delete_share=None)
            for group in group_by_mall(scopes_of(catalogue.TYPES["articles"], [])):
                await forced.reconcile(group)
        mirror.close()
        assert compare(db, emu, ["articles"]).differences == 0


async def test_an_unchanged_listing_answers_304_and_leaves_the_mirror_as_it_was(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Polls send the ETag their last identical query got: an unchanged listing is a 304
    without a body, the mirror untouched; a change gives a new ETag and its rows."""
    import sqlite3

    def snapshot() -> list[Any]:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("select * from deals order by id").fetchall()
        finally:
            conn.close()

    async with make_emulator(resources=600, seed=4) as emu:
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["deals"])
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            # The lookback's ceiling at the overlap: the deep re-read asks the same query.
            poller = Poller(client, mirror, page_size=100, overlap=5.0, lookback_max=5.0)
            scopes = scopes_of(catalogue.TYPES["deals"], [])
            for _ in range(2):  # the first moves the cursor to the newest stamp served
                for scope in scopes:
                    await poller.poll_scope(scope)  # learns each scope's ETag
            before, seen_304 = snapshot(), client.session.stats.statuses[304]
            for scope in scopes:
                result = await poller.poll_scope(scope)
                assert result.rows == 0
            assert client.session.stats.statuses[304] - seen_304 == len(scopes)
            assert snapshot() == before
            deal = emu.ids(
                "deals",
            )[0]
            emu.update("deals", deal, {"title": "after the 304s"})
            rows = sum([(await poller.poll_scope(s)).rows for s in scopes])
            assert rows >= 1
            assert any(r[0] == int(deal) and "after the 304s" in r for r in snapshot())
        mirror.close()


async def test_a_listing_whose_included_image_changed_is_not_a_304(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The ETag follows the body: an image edited without its deal being touched changes the
    deals listing that includes it, so the conditional poll gets the new body, not a 304."""
    async with make_emulator(resources=400, seed=6) as emu:
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["deals"])
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            rtype = catalogue.TYPES["deals"]
            first = await client.list_page(Scope(rtype), 1, conditional=True)
            image = next(i["id"] for i in first.included if i["type"] == "images")
            again = await client.list_page(Scope(rtype), 1, conditional=True)
            assert again.not_modified
            emu.update("images", image, {"alt_text": "edited, owner untouched"})
            after = await client.list_page(Scope(rtype), 1, conditional=True)
            assert not after.not_modified
            assert any(
                i["id"] == image and i["attributes"]["alt_text"] == "edited, owner untouched"
                for i in after.included
            )
        mirror.close()
