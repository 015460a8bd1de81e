"""`sync.store.meta`: `_sync_meta` and the polls' cursors, on a real SQLite file."""

from __future__ import annotations

from sync.channel.client import ChannelClient
from sync.channel.paging import META_KEY as PAGING_KEY
from sync.core.config import UpstreamSettings
from sync.store import Mirror


def test_meta_set_get_and_remove(mirror: Mirror) -> None:
    meta = mirror.meta
    assert meta.get("k") is None
    meta.set("k", "1")
    meta.set("k", "2")
    assert meta.get("k") == "2"
    meta.set("k", None)
    assert meta.get("k") is None


def test_meta_is_the_store_a_client_keeps_what_it_learns_in(mirror: Mirror) -> None:
    """`ChannelClient(store=mirror.meta)`: the page bound a client learns lands in
    `_sync_meta`, and a client built on it later starts from it (`MetaStore`)."""
    settings = UpstreamSettings(base_url="http://u", email="a@x", password="pw")
    first = ChannelClient(settings, store=mirror.meta)
    first.session.paging.learn(30)
    assert mirror.meta.get(PAGING_KEY) is not None
    again = ChannelClient(settings, store=mirror.meta)
    assert again.session.paging.size == 30


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


def test_a_record_of_numbers_survives_damage_and_keeps_each_name(mirror: Mirror) -> None:
    meta = mirror.meta
    assert meta.numbers("k") == {}
    meta.set_number("k", "deals", 7)
    meta.set_number("k", "contacts", 9)
    assert meta.numbers("k") == {"deals": 7, "contacts": 9}
    meta.set("k", '{"deals": true, "x": "y", "contacts": 3}')  # only whole numbers are kept
    assert meta.numbers("k") == {"contacts": 3}
    meta.set("k", "not json")
    assert meta.numbers("k") == {}
