"""`sync.store.migrations`: each step on the older shape it repairs, and a no-op the second time."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sync.store import Mirror, indexes, migrations
from sync.store.schema import Schema
from tests.support.store_units import Opened, rows


def _opened(mirror: Mirror, tmp_path: Path) -> Opened:
    return Opened(mirror.conn, tmp_path / "m.db", Schema(mirror.conn))


def _older(conn: sqlite3.Connection, table: str, columns: str) -> None:
    """`table` as an older sync made it."""
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"CREATE TABLE {table} ({columns})")


def _master(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return rows(conn, "SELECT type, name, sql FROM sqlite_master ORDER BY name")


def test_tombstones_of_an_older_sync_are_dropped_once(mirror: Mirror, tmp_path: Path) -> None:
    conn = mirror.conn
    _older(
        conn, "_sync_tombstones", "type TEXT, id INTEGER, deleted_at TEXT, PRIMARY KEY (type, id)"
    )
    conn.execute("INSERT INTO _sync_tombstones VALUES ('deals', 1, 'x'), ('stores', 2, NULL)")
    migrations.tombstone_source(_opened(mirror, tmp_path))
    assert rows(conn, "SELECT * FROM _sync_tombstones") == []
    conn.execute("INSERT INTO _sync_tombstones VALUES ('deals', 3, 'y', 'feed')")
    migrations.tombstone_source(_opened(mirror, tmp_path))  # the column is there: nothing
    assert rows(conn, "SELECT * FROM _sync_tombstones") == [("deals", 3, "y", "feed")]


def test_older_run_records_get_their_pid_and_sign_of_life(mirror: Mirror, tmp_path: Path) -> None:
    conn = mirror.conn
    _older(conn, "_sync_runs", "id INTEGER PRIMARY KEY, kind TEXT, status TEXT, error TEXT")
    conn.execute("INSERT INTO _sync_runs (kind, status) VALUES ('backfill', 'ok')")
    migrations.run_records(_opened(mirror, tmp_path))
    migrations.run_records(_opened(mirror, tmp_path))
    assert rows(conn, "SELECT kind, status, pid, seen_at FROM _sync_runs") == [
        ("backfill", "ok", None, None)
    ]


def test_an_unfinished_end_phase_loses_its_scratch_and_its_stale_index(
    mirror: Mirror, tmp_path: Path
) -> None:
    conn = mirror.conn
    mirror.schema.ensure_content("tags", {"id": 1, "name": "amber"})
    conn.execute("INSERT INTO tags (id, name) VALUES (1, 'amber')")
    conn.execute("DROP TRIGGER tags_au")
    conn.execute("UPDATE tags SET name = 'birch' WHERE id = 1")  # the index misses it
    (tmp_path / "m.db-fts-build").write_bytes(b"scratch")
    opened = _opened(mirror, tmp_path)
    opened.meta.set(indexes.END_PHASE, "2026-01-01T00:00:00.000Z")
    migrations.unfinished_end_phase(opened)
    assert not (tmp_path / "m.db-fts-build").exists()
    assert rows(conn, "SELECT rowid FROM tags_fts WHERE tags_fts MATCH 'birch'") == [(1,)]


def test_scripts_merged_by_an_older_sync_go_to_every_type_it_listed(
    mirror: Mirror, tmp_path: Path
) -> None:
    conn = mirror.conn
    _older(
        conn,
        "meta_scripts",
        "id TEXT PRIMARY KEY, type TEXT, content TEXT, first_seen_at, last_seen_at",
    )
    conn.execute(
        "INSERT INTO meta_scripts VALUES ('a', 'js', 'x()', 'f1', 'l1'), ('b', 'css', 'y', 'f2', 'l2')"
    )
    conn.execute("INSERT INTO _sync_cursors (type, scope, cursor) VALUES ('deals', '', 'c')")
    conn.execute("INSERT INTO _sync_backfill (type, scope) VALUES ('stores', '1'), ('tags', '')")
    migrations.scripts_per_position(_opened(mirror, tmp_path))
    assert rows(
        conn,
        "SELECT type, position, script_type, content, first_seen_at FROM meta_scripts ORDER BY type, position",
    ) == [
        ("deals", 0, "js", "x()", "f1"),
        ("deals", 1, "css", "y", "f2"),
        ("stores", 0, "js", "x()", "f1"),
        ("stores", 1, "css", "y", "f2"),
    ]  # tags: not listable, no scripts of its own


def test_every_step_again_on_a_migrated_file_changes_nothing(
    mirror: Mirror, tmp_path: Path
) -> None:
    conn = mirror.conn
    conn.execute(
        "CREATE TABLE stores (id INTEGER PRIMARY KEY, mall_id INTEGER, name TEXT, updated_at TEXT)"
    )
    conn.execute("INSERT INTO stores VALUES (3, 7, 's', 'x')")
    migrations.apply(_opened(mirror, tmp_path))
    once = _master(conn)
    assert ("table", "malls_stores") in [r[:2] for r in once]
    migrations.apply(_opened(mirror, tmp_path))
    assert _master(conn) == once
    assert rows(conn, "SELECT malls_id, stores_id FROM malls_stores") == [(7, 3)]


def test_foreign_keys_declared_later_leave_mall_deals_listed_from_the_routes(
    mirror: Mirror, tmp_path: Path
) -> None:
    # A table made before its target had an `id` gets its foreign key on the next open; the
    # rebuild drops our views, and `malls_deals` may be a table by then (the strict chaos run).
    schema, conn = mirror.schema, mirror.conn
    schema.ensure_content("malls", {"id": 1, "exclude_national_deals": 0})
    schema.ensure_content("deals", {"id": 1, "is_local": 1, "visibility": "Public"})
    schema.ensure_link("malls_stores", "malls_id", "stores_id", "malls", "stores")
    schema.ensure_link("deals_stores", "deals_id", "stores_id", "deals", "stores")
    schema.materialize_mall_deals()
    conn.execute("INSERT INTO malls_deals (malls_id, deals_id) VALUES (1, 1)")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, mall_id INTEGER, updated_at TEXT)")
    migrations.declare_foreign_keys(_opened(mirror, tmp_path))
    assert [fk.column for fk in schema.db.table("events").foreign_keys] == ["mall_id"]
    assert rows(conn, "SELECT malls_id, deals_id FROM malls_deals") == [(1, 1)]
