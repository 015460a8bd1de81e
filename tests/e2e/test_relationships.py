"""Every relationship the spec lists for a mirrored type round-trips, wherever the emulator
serves its linkage: owned link tables, the inverse views, the mall <-> deal association
(national deals included unless the mall excludes them), contacts' malls, and the
sideloaded types' own links (`images_tags`, `tags_tags`). Linkage that changes without the
owner's `updated_at` moving is repaired within one reconcile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sync.emulator.dataset import Dataset
from sync.emulator.query import QueryError, parse
from sync.jobs.proving.reconcile import run_reconcile
from sync.model import catalogue
from sync.store import Mirror
from sync.store.schema import VIEWS
from tests.support.backfilled import backfill
from tests.support.compare import compare

#: The link tables and views docs/schema.md lists beyond the first round's.
NEW_TABLES = (
    "articles_products",
    "products_stores",
    "stores_contacts",
    "stores_social_feeds",
    "malls_contacts",
    "images_tags",
    "tags_tags",
)


def _rows(db: Path, sql: str) -> set[tuple[Any, ...]]:
    m = Mirror.open(db, readonly=True)
    try:
        return {tuple(r) for r in m.conn.execute(sql)}
    finally:
        m.close()


async def test_every_relationship_round_trips(make_emulator: Any, tmp_path: Path) -> None:
    async with make_emulator(resources=1500, seed=5) as emu:
        malls = sorted(emu.snapshot("malls"), key=int)
        # One mall that excludes national deals, one that does not.
        emu.update("malls", int(malls[0]), {"exclude_national_deals": True})
        emu.update("malls", int(malls[1]), {"exclude_national_deals": False})
        db = tmp_path / "m.db"
        await backfill(emu, db)

        cmp = compare(db, emu)
        assert cmp.differences == 0, cmp.summary()
        for table in NEW_TABLES:
            assert _rows(db, f"SELECT * FROM [{table}] LIMIT 1"), f"{table} is empty"
        for view in VIEWS:
            assert _rows(db, f"SELECT * FROM [{view}] LIMIT 1"), f"view {view} is empty"

        # The mall <-> deal association is what GET /malls/{id}/deals lists (its default
        # visibility, Public).
        deals = emu.snapshot("deals")
        national = {
            int(i) for i, a in deals.items() if not a["is_local"] and a["visibility"] == "Public"
        }
        assert national
        for mall in malls[:2]:
            listed = {int(i) for i in emu.ids("deals", mall_id=mall, visibility="Public")}
            joined = {
                r[0] for r in _rows(db, f"SELECT deals_id FROM malls_deals WHERE malls_id = {mall}")
            }
            assert joined == listed
        excluded = {
            r[0] for r in _rows(db, f"SELECT deals_id FROM malls_deals WHERE malls_id = {malls[0]}")
        }
        included = {
            r[0] for r in _rows(db, f"SELECT deals_id FROM malls_deals WHERE malls_id = {malls[1]}")
        }
        assert not excluded & national and national <= included

        # Contacts carry their malls: what GET /malls/{id}/contacts lists.
        for mall in malls:
            want = {int(i) for i in emu.ids("contacts") if emu.mall_of("contacts", i) == mall}
            have = {
                r[0]
                for r in _rows(
                    db, f"SELECT contacts_id FROM malls_contacts WHERE malls_id = {mall}"
                )
            }
            assert have == want


async def test_linkage_changed_without_the_owner_is_repaired_by_one_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=1000, seed=8) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db)
        mall = sorted(emu.snapshot("malls"), key=int)[0]
        mall_stamp = emu.snapshot("malls")[mall]["updated_at"]
        # A contact added to a mall: the mall's `updated_at` does not move.
        contact = emu.data.create("contacts", mall=int(mall))
        # A product deleted: articles linking it drop it without being touched.
        linked = _rows(db, "SELECT articles_id, products_id FROM articles_products")
        article, product = sorted(linked)[0]
        emu.delete("products", product)
        assert emu.snapshot("malls")[mall]["updated_at"] == mall_stamp
        # The mirror drops links to a deleted row with the row (the deletions feed, here).
        m = Mirror.open(db)
        m.table("products").delete([product])
        m.close()
        assert (article, product) not in _rows(
            db, "SELECT articles_id, products_id FROM articles_products"
        )
        assert (int(mall), contact.id) not in _rows(
            db, "SELECT malls_id, contacts_id FROM malls_contacts"
        )

        await run_reconcile(settings)

        assert (int(mall), contact.id) in _rows(
            db, "SELECT malls_id, contacts_id FROM malls_contacts"
        )
        cmp = compare(db, emu)
        assert cmp.differences == 0, cmp.summary()


def test_the_emulator_refuses_to_include_what_it_does_not_model() -> None:
    kw: dict[str, Any] = {"date_fields": frozenset(), "equal_filters": frozenset()}
    with pytest.raises(QueryError, match="variants of articles cannot be included"):
        parse("articles", {"include": "variants"}, **kw)
    with pytest.raises(QueryError, match="is not a relationship"):
        parse("articles", {"include": "images.malls"}, **kw)
    q = parse("deals", {"include": "images,images.tags,tags.tags"}, **kw)
    assert q.include == ("images", "images.tags", "tags.tags")
    # Every relationship the mirror follows is one the emulator models, nested ones too.
    for rtype in catalogue.TYPES.values():
        if rtype.include:
            parse(rtype.name, {"include": rtype.include}, **kw)


def test_inverse_linkage_follows_its_owner() -> None:
    data = Dataset(resources=600, seed=4)
    product = next(
        data.by_type["products"][i]
        for i in data.order["products"]
        if data.by_type["products"][i].links["stores"]
    )
    store = data.by_type["stores"][product.links["stores"][0]]
    assert product.id in (data.linkage(store, "products") or [])
    data.delete("products", product.id)
    assert product.id not in (data.linkage(store, "products") or [])
