"""`sync.store.meta`: `_sync_meta` and the polls' cursors, on a real SQLite file."""

from __future__ import annotations

from sync.store import Mirror
from sync.store.meta import Meta


def test_meta_set_get_and_remove(mirror: Mirror) -> None:
    meta = mirror.meta
    assert meta.get("k") is None
    meta.set("k", "1")
    meta.set("k", "2")
    assert meta.get("k") == "2"
    meta.set("k", None)
    assert meta.get("k") is None


def test_meta_answers_the_channels_store_protocol(mirror: Mirror) -> None:
    """The client keeps what it learns through `get_meta`/`set_meta` (`MetaStore`)."""
    mirror.meta.set_meta("upstream_profile", "{}")
    assert mirror.meta.get_meta("upstream_profile") == "{}" == mirror.meta.get("upstream_profile")
    assert Meta.get_meta is Meta.get and Meta.set_meta is Meta.set


def test_the_schema_version_is_in_meta(mirror: Mirror) -> None:
    assert mirror.meta.get("schema_version")


def test_cursors_per_type_and_scope(mirror: Mirror) -> None:
    cursors = mirror.cursors
    assert cursors.get("deals", "") is None
    cursors.set("deals", "", "2026-01-01T00:00:00.000Z")
    cursors.set("deals", "mall=1", "2026-01-02T00:00:00.000Z")
    cursors.set("deals", "", "2026-01-03T00:00:00.000Z")
    assert cursors.get("deals", "") == "2026-01-03T00:00:00.000Z"
    assert cursors.get("deals", "mall=1") == "2026-01-02T00:00:00.000Z"
    moved = mirror.conn.execute("SELECT updated_at FROM _sync_cursors").fetchall()
    assert all(r[0] for r in moved)


def test_a_write_inside_a_transaction_stays_in_it(mirror: Mirror) -> None:
    """Neither part commits on its own: a rolled-back transaction takes their writes."""
    mirror.conn.execute("BEGIN")
    mirror.meta.set("k", "v")
    mirror.cursors.set("deals", "", "c")
    mirror.conn.execute("ROLLBACK")
    assert mirror.meta.get("k") is None and mirror.cursors.get("deals", "") is None
