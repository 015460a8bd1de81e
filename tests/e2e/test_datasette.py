"""A backfilled mirror in Datasette: foreign keys turn into links, `?_search=` searches, the
bookkeeping is hidden and every table is described (`ccsync datasette-metadata`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from datasette.app import Datasette

from sync.cli import main
from sync.emulator import Emulator
from sync.readers.datasette import BOOKKEEPING_TABLES, datasette_metadata
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.paths import ROOT


async def test_datasette_follows_foreign_keys_and_searches(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=600, seed=12) as emu:
        db = tmp_path / "mirror.db"
        await backfill(emu, db)
        mirror = Mirror.open(db)
        deal_id, image_id = mirror.conn.execute(
            "SELECT deals_id, images_id FROM deals_images LIMIT 1"
        ).fetchone()
        word = (
            mirror.conn.execute("SELECT title FROM deals WHERE id = ?", (deal_id,))
            .fetchone()[0]
            .split()[0]
        )
        mirror.close()

    ds = Datasette([str(db)], metadata=datasette_metadata(db))
    await ds.invoke_startup()
    # A link table's columns point at their rows: Datasette labels them from the foreign keys.
    r = await ds.client.get(
        f"/mirror/deals_images.json?deals_id={deal_id}&images_id={image_id}&_labels=on&_shape=array"
    )
    assert r.status_code == 200, r.text
    (row,) = r.json()
    assert row["deals_id"]["value"] == deal_id and "label" in row["deals_id"]
    assert row["images_id"]["value"] == image_id
    # ?_search= uses the FTS5 index.
    r = await ds.client.get(f"/mirror/deals.json?_search={word}&_shape=array&_size=max")
    assert r.status_code == 200, r.text
    found = r.json()
    assert found and all(word.lower() in json.dumps(d).lower() for d in found)
    assert any(d["id"] == deal_id for d in found)
    # Bookkeeping hidden, content described.
    r = await ds.client.get("/mirror.json")
    tables = {t["name"]: t for t in r.json()["tables"]}
    assert all(tables[t]["hidden"] for t in BOOKKEEPING_TABLES if t in tables)
    assert not tables["deals"]["hidden"]
    meta = (await ds.client.get("/mirror/images.json")).json()
    assert meta["rows"] is not None


async def test_metadata_command_prints_what_datasette_reads(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Every table and view of the mirror described, none it does not hold (#40: no
    `mgmt_press_releases` without `[management]`)."""
    db = tmp_path / "mirror.db"
    await backfill(emulator, db, types=["malls", "deals", "stores"])
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "http://127.0.0.1:1"\nemail = "a@b.c"\npassword = "pw"\n'
        f'[mirror]\npath = "{db}"\n'
    )
    r = CliRunner().invoke(main, ["datasette-metadata", "--config", str(cfg)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    tables = doc["databases"]["mirror"]["tables"]
    assert "replace(url, size_parameter" in tables["images"]["description"]
    assert "national" in tables["malls_deals"]["description"]

    assert tables["_sync_runs"]["hidden"] is True
    assert all(t.get("description") for t in tables.values())
    conn = sqlite3.connect(db)
    present = {
        n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    }
    conn.close()
    assert set(tables) <= present
    assert not [t for t in tables if t.startswith(("mgmt_", "articles"))]


async def test_the_metadata_agrees_with_the_schema_page_and_hides_what_is_not_data(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Every table and view of a backfilled mirror is described or hidden; `sqlite_sequence`
    and every `_sync_*` table are hidden; the words are docs/schema.md's (#48)."""
    db = tmp_path / "mirror.db"
    await backfill(emulator, db)
    conn = sqlite3.connect(db)
    names = {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    }
    conn.close()
    tables = datasette_metadata(db)["databases"]["mirror"]["tables"]
    shown = {n for n in names if "_fts" not in n}  # Datasette hides the FTS tables itself
    assert shown <= set(tables), sorted(shown - set(tables))
    hidden = {n for n, meta in tables.items() if meta.get("hidden")}
    assert hidden == {n for n in names if n.startswith("_sync_")} | {"sqlite_sequence"}
    assert all(tables[n]["description"] for n in shown - hidden)
    assert "the lowest mall that lists it (NULL when none does)" in tables["stores"]["description"]
    assert "malls_stores" in tables["stores"]["description"]
    assert "(mall, row)" in tables["malls_stores"]["description"]
    words = tables["malls_deals"]["description"]
    assert (
        "default visibility (Public)" in words and "a table filled from every mall's route" in words
    )
    schema = (ROOT / "docs" / "schema.md").read_text()
    assert "the *lowest* mall that lists the row (NULL when none does)" in schema
    assert "**table filled from every mall's route**" in schema
