"""`sync.store.press`: press releases per (id, locale), their categories, and a prune that needs proof."""

from __future__ import annotations

from typing import Any

from sync.store import Mirror
from sync.store.press import PressReleases
from tests.support.store_units import rows


def _release(rid: int, *categories: Any, **more: Any) -> dict[str, Any]:
    return {"id": rid, "title": f"t{rid}", "category_ids": list(categories), **more}


def test_a_page_is_stored_per_locale_with_json_for_structures(mirror: Mirror) -> None:
    press = PressReleases(mirror.conn)
    assert (
        press.write("en", "r1", [_release(1, 4, 5, "x", image={"url": "u"}, headline=["a"])]) == 1
    )
    press.write("fr", "r1", [_release(1, 4)])
    assert rows(
        mirror.conn,
        "SELECT id, locale, headline, image, category_ids, seen_run FROM mgmt_press_releases ORDER BY locale",
    ) == [
        (1, "en", '["a"]', '{"url":"u"}', '[4,5,"x"]', "r1"),
        (1, "fr", None, "null", "[4]", "r1"),
    ]
    press.write("en", "r2", [_release(1, 6)])  # categories replaced for that locale only
    assert rows(
        mirror.conn, "SELECT locale, category_id FROM mgmt_press_releases_categories ORDER BY 1, 2"
    ) == [
        ("en", 6),
        ("fr", 4),
    ]


def test_only_rows_unseen_and_proven_gone_are_pruned(mirror: Mirror) -> None:
    press = PressReleases(mirror.conn)
    press.write("en", "r1", [_release(1, 7), _release(2, 8), _release(3)])
    press.write("de", "r1", [_release(2)])
    press.write("en", "r2", [_release(1, 7)])
    assert press.unseen("en", "r2") == [2, 3]
    assert press.prune("en", "r2", listed=1, proven=[2, 1]) == 1  # 1 was seen by r2: kept
    assert rows(mirror.conn, "SELECT id, locale FROM mgmt_press_releases ORDER BY locale, id") == [
        (2, "de"),
        (1, "en"),
        (3, "en"),
    ]
    assert rows(mirror.conn, "SELECT press_release_id FROM mgmt_press_releases_categories") == [
        (1,)
    ]


def test_an_empty_listing_never_empties_the_table(mirror: Mirror) -> None:
    press = PressReleases(mirror.conn)
    press.write("en", "r1", [_release(1)])
    assert press.prune("en", "r2", listed=0, proven=[1]) == 0
    assert press.unseen("en", "r2") == [1]
