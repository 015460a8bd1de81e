"""`sync.store.repair`: what differs under an unchanged stamp (columns, link order, a missing row), and what is none."""

from __future__ import annotations

from typing import Any

from sync.pipeline.batches import Staged
from sync.store import Mirror
from sync.store.deletions import Deletions, SqliteTombstones
from sync.store.repair import Repair, differences
from tests.support.store_units import staged, write

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"


def _differences(mirror: Mirror, batches: list[Staged]) -> list[Repair]:
    """Every batch of a staged page compared with the mirror (its tables made first)."""
    deletions = Deletions(SqliteTombstones(mirror.conn, mirror.schema))
    return [r for b in batches for r in differences(mirror.schema, deletions, b)]


def _deal(rid: int, title: str, images: list[int], updated: str = T0) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": title, "updated_at": updated},
        "relationships": {"images": {"data": [{"type": "images", "id": str(i)} for i in images]}},
    }


def test_a_link_order_a_column_and_a_missing_row_are_repairs(mirror: Mirror) -> None:
    write(mirror.conn, mirror.schema, staged("deals", [_deal(1, "a", [5, 6]), _deal(2, "b", [7])]))
    served = staged(
        "deals", [_deal(1, "a", [6, 5]), _deal(2, "changed", [7, 7]), _deal(3, "c", [])]
    )
    assert _differences(mirror, served) == [
        Repair("deals", 1, ("links.images",)),
        Repair("deals", 2, ("title",)),  # a repeated link is no difference
        Repair("deals", 3, ("missing",)),
    ]
    write(mirror.conn, mirror.schema, served)  # what `Mirror.repair` writes next
    assert _differences(mirror, served) == []


def test_another_mall_s_route_and_a_deleted_row_s_copy_are_no_repairs(mirror: Mirror) -> None:
    store = {"id": "3", "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
    write(mirror.conn, mirror.schema, staged("stores", [store], mall_id=4))
    assert _differences(mirror, staged("stores", [store], mall_id=9)) == []
    write(mirror.conn, mirror.schema, staged("deals", [_deal(1, "a", [])]))
    Deletions(SqliteTombstones(mirror.conn, mirror.schema)).apply_feed("deals", {1: T1})
    assert _differences(mirror, staged("deals", [_deal(1, "old copy", [])])) == []
    newer = staged("deals", [_deal(1, "a", [], updated="2026-01-01T00:00:01.000Z")])
    write(mirror.conn, mirror.schema, staged("deals", [_deal(2, "b", [])]))
    assert _differences(mirror, newer) == []  # tombstoned at T1: the feed's entry is newer
