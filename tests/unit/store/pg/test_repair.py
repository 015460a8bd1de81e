"""`sync.store.pg.repair` beside `sync.store.repair`: the verify's compare names the same repairs
in either store, by the one rule both ask (`sync.store.repair.Judging`): a missing row, each
column and link list differing under an equal stamp; never lag, never a tombstoned copy."""

from __future__ import annotations

from typing import Any

from sync.store import MirrorStore
from tests.support.store_units import staged
from tests.unit.store.pg.test_pagewrite import T0, T1, T2


def _deal(rid: int, updated: str, title: str, stores: list[int]) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": title, "updated_at": updated},
        "relationships": {"stores": {"data": [{"type": "stores", "id": str(s)} for s in stores]}},
    }


def test_the_compare_names_what_differs_under_an_equal_stamp_and_nothing_else(
    either: MirrorStore,
) -> None:
    either.write_staged(
        staged(
            "deals",
            [
                _deal(1, T1, "same", [1]),
                _deal(2, T1, "b", [1]),
                _deal(3, T1, "c", [1]),
                _deal(4, T1, "d", [1, 2]),
                _deal(6, T0, "gone", [1]),
            ],
        )
    )
    either.table("deals").apply_feed({6: T2})  # deleted upstream at T2: tombstoned
    served = [
        _deal(1, T1, "same", [1]),
        _deal(2, T1, "changed under T1", [1]),
        _deal(3, T2, "newer: lag", [1]),
        _deal(4, T1, "d", [2, 1]),  # the links' order changed alone
        _deal(5, T1, "never mirrored", []),
        _deal(6, T0, "the old copy", [1]),  # older than its tombstone: refused
    ]
    found = {r.id: r.what for r in either.repair(staged("deals", served))}
    assert found == {2: ("title",), 4: ("links.stores",), 5: ("missing",)}
    assert either.table("deals").get(6) is None
    assert either.repair(staged("deals", served)) == []  # written: nothing differs now
