"""`sync.store.indexes`: a bulk load's end phase builds every index once, and marks itself until it ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.store import Mirror, indexes
from sync.store.schema import Schema
from tests.support.store_units import Opened, rows, staged, write

T0 = "2026-01-01T00:00:00.000Z"


def _page(opened: Opened) -> None:
    deal = {
        "id": "1",
        "type": "deals",
        "attributes": {"title": "amber sale", "updated_at": T0},
        "relationships": {"images": {"data": [{"type": "images", "id": "5"}]}},
    }
    image = {"id": "5", "type": "images", "attributes": {"alt_text": "a", "updated_at": T0}}
    write(opened.conn, opened.schema, staged("deals", [deal], [image]))


def _built(opened: Opened) -> set[str]:
    return {
        r[0]
        for r in opened.conn.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'idx_%' OR name LIKE '%_fts' "
            "OR name LIKE '_sync_changes_%'"
        )
    }


def test_a_deferred_load_gets_its_indexes_and_one_feed_entry_a_type_at_its_end(
    mirror: Mirror, tmp_path: Path
) -> None:
    opened = Opened(mirror.conn, tmp_path / "m.db", Schema(mirror.conn))
    indexes.defer(opened, True)
    _page(opened)
    assert _built(opened) == set()
    assert rows(mirror.conn, "SELECT * FROM _sync_changes") == []
    indexes.defer(opened, False)
    assert {
        "idx_deals_updated_at",
        "idx_deals_images_images_id",
        "deals_fts",
        "images_fts",
        "_sync_changes_deals_insert",
        "_sync_changes_images_delete",
    } <= _built(opened)
    assert rows(mirror.conn, "SELECT type, id, op FROM _sync_changes ORDER BY type") == [
        ("deals", None, "backfill"),
        ("images", None, "backfill"),
    ]
    assert rows(mirror.conn, "SELECT rowid FROM deals_fts WHERE deals_fts MATCH 'amber'") == [(1,)]
    assert opened.meta.get(indexes.END_PHASE) is None
    indexes.defer(opened, False)  # not deferred: nothing noted again
    assert len(rows(mirror.conn, "SELECT * FROM _sync_changes")) == 2


def test_an_end_phase_that_fails_stays_marked_and_leaves_no_scratch(
    mirror: Mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = Opened(mirror.conn, tmp_path / "m.db", Schema(mirror.conn))
    indexes.defer(opened, True)
    _page(opened)

    def full(tables: list[str]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(opened.schema, "create_indexes", full)
    with pytest.raises(OSError):
        indexes.defer(opened, False)
    assert opened.meta.get(indexes.END_PHASE) is not None  # the next open checks every index
    assert not (tmp_path / "m.db-fts-build").exists()
    assert rows(mirror.conn, "SELECT name FROM sqlite_master WHERE name LIKE '%_fts'") == []
