"""Images, tags and groups changed or deleted upstream reach the mirror within one reconcile,
though no owner's `updated_at` moved (the emulator's default), and unreferenced rows go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sync.jobs.proving.reconcile import run_reconcile
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.pages import write_page


def _linked_images(emu: Any, type_name: str) -> list[tuple[int, str]]:
    """(owner id, image id) pairs the emulator serves for `type_name`."""
    out = []
    for rid in emu.ids(type_name):
        data = emu.resource(type_name, rid, ["images"])["relationships"]["images"]["data"]
        out += [(int(rid), d["id"]) for d in data]
    return out


def _images(db: Path) -> dict[int, tuple[Any, ...]]:
    m = Mirror.open(db, readonly=True)
    try:
        return {r[0]: r[1:] for r in m.conn.execute("SELECT id, url, alt_text FROM images")}
    finally:
        m.close()


async def test_sideload_changes_and_deletions_reach_the_mirror_in_one_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=800, seed=21) as emu:
        assert not emu.data.touch_owners
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["deals", "articles"])
        pairs = _linked_images(emu, "deals")
        shared = {i for _, i in pairs}
        changed, deleted = sorted(shared, key=int)[:2]
        owners = sorted({o for o, i in pairs if i == deleted})
        stamps = {o: emu.snapshot("deals")[str(o)]["updated_at"] for o in owners}
        emu.update("images", int(changed), {"alt_text": "changed upstream"})
        emu.delete("images", int(deleted))
        assert {o: emu.snapshot("deals")[str(o)]["updated_at"] for o in owners} == stamps
        before = _images(db)
        assert before[int(changed)][1] != "changed upstream"
        assert int(deleted) in before

        await run_reconcile(settings)

        after = _images(db)
        assert after[int(changed)][1] == "changed upstream"
        assert int(deleted) not in after
        m = Mirror.open(db, readonly=True)
        links = set(m.conn.execute("SELECT deals_id, images_id FROM deals_images"))
        referenced = {
            r[0]
            for r in m.conn.execute(
                "SELECT images_id FROM deals_images UNION SELECT images_id FROM articles_images"
            )
        }
        m.close()
        assert not any(i == int(deleted) for _, i in links)
        assert links == {(o, int(i)) for o, i in _linked_images(emu, "deals")}
        # Every image left is referenced, and every referenced image served is mirrored.
        assert set(after) == referenced & {int(i) for i in emu.ids("images")}


def test_prune_removes_only_unreferenced_rows(tmp_path: Path) -> None:
    from sync.jobs.malls import sideloads
    from sync.model import catalogue

    m = Mirror.open(tmp_path / "m.db")
    deal = {
        "id": "1",
        "type": "deals",
        "attributes": {"title": "d", "updated_at": "2026-01-01T00:00:00.000Z"},
        "relationships": {
            "images": {"data": [{"type": "images", "id": "5"}]},
            "tags": {"data": [{"type": "tags", "id": "8"}]},
        },
    }
    images = [
        {
            "id": str(i),
            "type": "images",
            "attributes": {"url": f"u{i}", "updated_at": "2026-01-01T00:00:00.000Z"},
        }
        for i in (5, 6)
    ]
    tags = [{"id": str(t), "type": "tags", "attributes": {"name": f"t{t}"}} for t in (8, 9)]
    write_page(m, catalogue.TYPES["deals"], [deal], [*images, *tags])
    assert sideloads.prune(m) == {"images": 1, "tags": 1}
    assert [r[0] for r in m.conn.execute("SELECT id FROM images")] == [5]
    assert [r[0] for r in m.conn.execute("SELECT id FROM tags")] == [8]
    assert sideloads.prune(m) == {}
    m.close()
