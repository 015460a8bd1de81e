"""sync.readers.datasette: metadata of the tables a mirror holds, bookkeeping hidden."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sync.core.errors import MirrorError
from sync.core.target import MirrorTarget
from sync.readers.datasette import BOOKKEEPING_TABLES, IMAGE_SIZE_SQL, datasette_metadata
from sync.store import Mirror
from tests.support.paths import ROOT


def _mirror(path: Path, *tables: str) -> Path:
    m = Mirror.open(path)
    for name in tables:
        m.conn.execute(f'CREATE TABLE IF NOT EXISTS "{name}" (id INTEGER PRIMARY KEY)')
    m.close()
    return path


def test_only_the_tables_present_are_described_under_the_files_stem(tmp_path: Path) -> None:
    meta = datasette_metadata(_mirror(tmp_path / "shop.db", "stores", "images", "deals_images"))
    tables = meta["databases"]["shop"]["tables"]
    assert {"stores", "images", "deals_images", "current_hours", "meta_scripts"} <= tables.keys()
    assert "deals" not in tables and "mgmt_press_releases" not in tables
    assert tables["stores"]["description"] == (
        "Channel Content API stores: one row per resource, one column per attribute (absolute "
        "stamps in UTC, YYYY-MM-DDTHH:MM:SS.sssZ). mall_id: the lowest mall that lists it (NULL "
        "when none does), a convenience: every mall that lists it is in malls_stores. "
        "Full-text search (?_search=) over name, description."
    )
    assert IMAGE_SIZE_SQL in tables["images"]["description"]
    assert "unreferenced rows are pruned" in tables["images"]["description"]
    assert tables["deals_images"] == {
        "description": "The images of each of deals (deals_id -> images.id as images_id), "
        "in the order served (position)."
    }


def test_every_bookkeeping_table_is_hidden(tmp_path: Path) -> None:
    assert "_sync_meta" in BOOKKEEPING_TABLES and "_sync_changes" in BOOKKEEPING_TABLES
    assert all(name.startswith("_sync_") for name in BOOKKEEPING_TABLES)
    tables = datasette_metadata(_mirror(tmp_path / "m.db"))["databases"]["m"]["tables"]
    hidden = {name for name, meta in tables.items() if meta.get("hidden")}
    present = {name for name in BOOKKEEPING_TABLES if name in tables}
    # SQLite's AUTOINCREMENT counters (`_sync_changes.seq`) are no data either (#48).
    assert hidden == present | {"sqlite_sequence"} and "_sync_runs" in hidden
    assert all(tables[n]["description"] == "sync's bookkeeping." for n in present)


def test_the_proof_books_tables_are_hidden_too(tmp_path: Path) -> None:
    m = Mirror.open(tmp_path / "m.db")
    m.conn.execute(  # as `sync.store.proof.ProofBook` creates them
        "CREATE TABLE IF NOT EXISTS _sync_proof_scopes (type TEXT NOT NULL, scope TEXT NOT NULL, "
        "proven_at TEXT NOT NULL, PRIMARY KEY (type, scope)) WITHOUT ROWID"
    )
    m.conn.execute(
        "CREATE TABLE IF NOT EXISTS _sync_proof_listing (unit TEXT NOT NULL, id INTEGER NOT NULL, "
        "updated_at TEXT, PRIMARY KEY (unit, id)) WITHOUT ROWID"
    )
    m.close()
    tables = datasette_metadata(tmp_path / "m.db")["databases"]["m"]["tables"]
    assert tables.get("_sync_proof_scopes", {}).get("hidden") is True
    assert tables.get("_sync_proof_listing", {}).get("hidden") is True


def test_every_sync_table_the_store_creates_is_hidden() -> None:
    """Any `_sync_*` table a store module creates is in `BOOKKEEPING_TABLES`: a new book (as
    the proof's were) cannot reach Datasette readers by being left off the list."""
    created = set()
    for module in (ROOT / "sync" / "store").glob("*.py"):
        created |= set(re.findall(r"CREATE TABLE IF NOT EXISTS (_sync_\w+)", module.read_text()))
    assert created and created <= set(BOOKKEEPING_TABLES), created - set(BOOKKEEPING_TABLES)


def test_a_postgresql_mirror_is_refused_in_one_line_without_the_password() -> None:
    with pytest.raises(MirrorError) as caught:
        datasette_metadata(MirrorTarget(url="postgresql://u:pw-Hidden@h/db", schema="s"))
    text = str(caught.value)
    assert text.startswith("Datasette reads SQLite files only, and this mirror is in PostgreSQL")
    assert "postgresql://u:***@h/db (schema s)" in text and "pw-Hidden" not in text
    assert "\n" not in text
