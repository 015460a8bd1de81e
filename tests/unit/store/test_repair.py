"""`sync.store.repair`: what differs under an unchanged stamp (columns, link order, a missing row), and what is none."""

from __future__ import annotations

from typing import Any

from sync.pipeline.batches import Staged
from sync.pipeline.seen import Seen
from sync.store import Mirror
from sync.store.deletions import Deletions
from sync.store.repair import Repair, repair_page
from tests.support.store_units import rows, staged, write

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


class Held:
    """What `repair_page` asks of the mirror, from the store's own parts."""

    def __init__(self, mirror: Mirror) -> None:
        self.conn, self.schema = mirror.conn, mirror.schema
        self._included_seen = Seen(100)
        self._deletions = Deletions(self.conn, self.schema)

    def ensure_schema(self, batches: list[Staged]) -> None:
        pass  # `write_staged` below makes what it needs

    def has_table(self, table: str) -> bool:
        return bool(self.schema.columns(table))

    def tombstones(self, type_name: str, ids: list[int]) -> dict[int, str | None]:
        return self._deletions.held(type_name, ids)

    def write_staged(self, batches: list[Staged]) -> None:
        write(self.conn, self.schema, batches)


def _deal(rid: int, title: str, images: list[int], updated: str = T0) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": title, "updated_at": updated},
        "relationships": {"images": {"data": [{"type": "images", "id": str(i)} for i in images]}},
    }


def test_a_link_order_a_column_and_a_missing_row_are_repairs(mirror: Mirror) -> None:
    held = Held(mirror)
    write(mirror.conn, mirror.schema, staged("deals", [_deal(1, "a", [5, 6]), _deal(2, "b", [7])]))
    served = [_deal(1, "a", [6, 5]), _deal(2, "changed", [7, 7]), _deal(3, "c", [])]
    repairs = repair_page(held, staged("deals", served))  # type: ignore[arg-type]
    assert repairs == [
        Repair("deals", 1, ("links.images",)),
        Repair("deals", 2, ("title",)),  # a repeated link is no difference
        Repair("deals", 3, ("missing",)),
    ]
    assert rows(
        mirror.conn, "SELECT images_id FROM deals_images WHERE deals_id = 1 ORDER BY position"
    ) == [(6,), (5,)]
    assert repair_page(held, staged("deals", served)) == []  # type: ignore[arg-type]


def test_another_mall_s_route_and_a_deleted_row_s_copy_are_no_repairs(mirror: Mirror) -> None:
    held = Held(mirror)
    store = {"id": "3", "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
    write(mirror.conn, mirror.schema, staged("stores", [store], mall_id=4))
    assert repair_page(held, staged("stores", [store], mall_id=9)) == []  # type: ignore[arg-type]
    assert rows(mirror.conn, "SELECT id, mall_id FROM stores") == [(3, 4)]
    write(mirror.conn, mirror.schema, staged("deals", [_deal(1, "a", [])]))
    held._deletions.apply_feed("deals", {1: T1})  # the mirror's one Deletions
    assert repair_page(held, staged("deals", [_deal(1, "old copy", [])])) == []  # type: ignore[arg-type]
    assert rows(mirror.conn, "SELECT id FROM deals") == []
