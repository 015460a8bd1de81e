"""A day of legitimate churn cannot trip the reconcile; a refusal never stops the other types
(issue 16, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sync.core.config import Settings
from sync.jobs.proving.reconcile import run_reconcile
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.settings import settings_for

TYPES = ["malls", "articles", "contacts", "deals"]


def _settings(emu: Any, db: Path) -> Settings:
    sections = {"schedule": {"reconcile_max_delete_share": 0.2}}
    return settings_for(emu, db, sections, types=TYPES, max_backoff=0.05)


async def test_a_quarter_of_a_small_table_deleted_while_down_is_reconciled(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=3500, seed=8) as emu:
        db = tmp_path / "m.db"
        settings = _settings(emu, db)
        await run_backfill(settings)
        contacts = emu.ids("contacts")
        assert 80 <= len(contacts) <= 150
        for rid in contacts[: len(contacts) // 4]:  # churn, all in the deletions feed
            emu.delete("contacts", rid)
        for rid in emu.ids("deals")[:5]:  # a type reconciled after contacts
            emu.update("deals", rid, {"title": "changed while down"})
        result, refusals = await run_reconcile(settings)
        assert refusals == []
        assert compare(db, emu, TYPES).differences == 0
        assert result["deals"][0] >= 5


async def test_a_refusal_in_one_type_leaves_the_others_reconciled(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=3500, seed=9) as emu:
        db = tmp_path / "m.db"
        settings = _settings(emu, db)
        await run_backfill(settings)
        emu.data.feed_deletions = False  # deletions nothing explains
        contacts = emu.ids("contacts")
        for rid in contacts[: len(contacts) // 2]:
            emu.delete("contacts", rid)
        for rid in emu.ids("articles"):  # the whole listing vanishes: an empty listing
            emu.delete("articles", rid)
        for rid in emu.ids("deals")[:5]:
            emu.update("deals", rid, {"title": "changed while down"})
        before = Mirror.open(db, readonly=True)
        local_contacts, local_articles = (
            before.table("contacts").count(),
            before.table("articles").count(),
        )
        before.close()
        result, refusals = await run_reconcile(settings)
        assert len(refusals) == 2
        assert any(r.startswith("contacts: refusing to delete") for r in refusals)
        assert any("articles" in r and "listed none" in r for r in refusals)
        after = Mirror.open(db, readonly=True)
        assert after.table("contacts").count() == local_contacts  # nothing deleted where refused
        assert after.table("articles").count() == local_articles
        after.close()
        comparison = compare(db, emu, ["deals", "malls"])
        assert comparison.differences == 0  # the types after the refusals were reconciled
        assert result["deals"][0] >= 5
        forced, refusals = await run_reconcile(settings, force=True)
        assert refusals == []
        assert compare(db, emu, TYPES).differences == 0
