"""Full-text indexes of a bulk load built beside the mirror and copied in (`store.ftsbuild`):
the same tables, SQL and search results as built in place, kept in step afterwards, and a
failed side build falls back to building in the mirror."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from sync.model import catalogue
from sync.store import Mirror
from sync.store.ftsbuild import SideBuild, fts_sql
from tests.support.pages import write_page

ARTICLES = catalogue.TYPES["articles"]
DEALS = catalogue.TYPES["deals"]
WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath", "iris", "juniper"]


def _resource(type_: str, i: int, **attributes: Any) -> dict[str, Any]:
    attributes["updated_at"] = "2026-01-01T00:00:00.000Z"
    return {"id": str(i), "type": type_, "attributes": attributes}


def _article(i: int) -> dict[str, Any]:
    return _resource(
        "articles",
        i,
        title=f"{WORDS[i % 10]} title {i}",
        subtitle=f"{WORDS[(i * 3) % 10]} sub",
        teaser=None if i % 7 == 0 else f"teaser {WORDS[(i * 7) % 10]}",
        content=" ".join(WORDS[(i + k) % 10] for k in range(i % 5 + 1)),
    )


def _deal(i: int) -> dict[str, Any]:
    return _resource(
        "deals",
        i,
        title=f"deal {WORDS[i % 10]}",
        retailer_name=WORDS[(i * 3) % 10],
        description=f"{WORDS[(i + 1) % 10]} {WORDS[(i + 2) % 10]} offer",
    )


def _load(path: Path, *, bulk: bool, n: int = 600) -> Mirror:
    m = Mirror.open(path)
    m.indexes.defer(bulk)
    for start in range(1, n, 100):
        write_page(m, ARTICLES, [_article(i) for i in range(start, start + 100)])
        write_page(m, DEALS, [_deal(i) for i in range(start, start + 100)])
    m.indexes.defer(False)
    return m


def _fts_schema(m: Mirror) -> list[tuple[str, str, str]]:
    return sorted(
        (t, n, s)
        for t, n, s in m.conn.execute("SELECT type, name, sql FROM sqlite_master")
        if "_fts" in n or (t == "trigger" and n.endswith(("_ai", "_ad", "_au")))
    )


def _search(m: Mirror, table: str, query: str) -> list[int]:
    return [
        r[0]
        for r in m.conn.execute(
            f"SELECT rowid FROM [{table}_fts] WHERE [{table}_fts] MATCH ? ORDER BY rowid", (query,)
        )
    ]


def _integrity(m: Mirror, table: str) -> None:
    # FTS5 compares its index with the content table: raises SQLITE_CORRUPT_VTAB on any drift.
    m.conn.execute(f"INSERT INTO [{table}_fts]([{table}_fts], rank) VALUES('integrity-check', 1)")


def test_a_bulk_load_gets_the_full_text_indexes_it_would_build_in_place(tmp_path: Path) -> None:
    side = _load(tmp_path / "side.db", bulk=True)
    assert not (tmp_path / "side.db-fts-build").exists()
    in_place = _load(tmp_path / "in_place.db", bulk=False)
    assert _fts_schema(side) == _fts_schema(in_place)
    assert sqlite_utils.Database(side.conn).table("articles").detect_fts() == "articles_fts"
    for table, queries in {
        "articles": ["amber", "teaser AND cedar", "title", '"birch sub"', "juni*"],
        "deals": ["offer", "dune", "retailer_name:grove", "deal NOT ember"],
    }.items():
        _integrity(side, table)
        for q in queries:
            found = _search(side, table, q)
            assert found == _search(in_place, table, q)
            assert found, q  # each query finds something: an empty index would not pass
    assert _search(side, "articles", "cedar") == _having("cedar", 601)
    # A copy made by the side build stays in step with later writes (through its triggers).
    changed = _article(3)
    changed["attributes"].update(title="quokka", updated_at="2026-02-01T00:00:00.000Z")
    write_page(side, ARTICLES, [changed])
    _integrity(side, "articles")
    assert _search(side, "articles", "quokka") == [3]
    assert 3 not in _search(side, "articles", "title")
    side.close()
    in_place.close()


def _having(word: str, n: int) -> list[int]:
    """The articles 1..n-1 with `word` in a full-text column, worked out in Python."""
    return [
        i
        for i in range(1, n)
        if any(
            word in str(v).split()
            for k, v in _article(i)["attributes"].items()
            if k != "updated_at"
        )
    ]


def test_a_failed_side_build_falls_back_to_building_in_the_mirror(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.db-fts-build").mkdir()  # SQLite cannot open a directory as its scratch file
    m = _load(tmp_path / "m.db", bulk=True, n=201)
    assert "mirror.fts_side_build_failed" in capsys.readouterr().out
    assert _search(m, "articles", "amber") == _having("amber", 201)
    _integrity(m, "articles")
    _integrity(m, "deals")
    m.close()


def test_the_sql_is_sqlite_utils_own() -> None:
    create, *triggers = fts_sql("deals", ["title", "description"])
    db = sqlite_utils.Database(memory=True)
    db.table("deals").create({"id": int, "title": str, "description": str}, pk="id")
    db.table("deals").enable_fts(["title", "description"], fts_version="FTS5", create_triggers=True)
    assert create == db.table("deals_fts").schema
    assert sorted(triggers) == sorted(t.sql for t in db.table("deals").triggers)
    assert len(triggers) == 3


def test_the_scratch_file_of_a_killed_build_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "m.db-fts-build").write_bytes(b"left by a run killed mid-build")
    m = _load(tmp_path / "m.db", bulk=True, n=201)
    assert not (tmp_path / "m.db-fts-build").exists()
    _integrity(m, "articles")
    assert _search(m, "articles", "amber") == _having("amber", 201)
    m.close()
    with sqlite3.connect(tmp_path / "m.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_side_build_itself_makes_the_indexes(tmp_path: Path) -> None:
    """Not the fallback: `SideBuild` alone builds and copies both tables' indexes."""
    m = Mirror.open(tmp_path / "m.db")
    m.indexes.defer(True)
    write_page(m, ARTICLES, [_article(i) for i in range(1, 201)])
    write_page(m, DEALS, [_deal(i) for i in range(1, 201)])
    plan = m.schema.fts_missing(["articles", "deals"])
    assert plan == {
        "articles": ["title", "subtitle", "teaser", "content"],
        "deals": ["title", "retailer_name", "description"],
    }
    assert SideBuild(m.path, plan).start().finish() == ["articles", "deals"]
    assert m.schema.fts_missing(["articles", "deals"]) == {}
    _integrity(m, "articles")
    _integrity(m, "deals")
    assert _search(m, "articles", "amber") == _having("amber", 201)
    m.close()


def test_with_litestream_checkpoints_the_copy_runs_no_checkpoint(tmp_path: Path) -> None:
    """`checkpoints = "litestream"`: the connection that copies the indexes in runs no WAL
    checkpoint either (the database file stays as created; every page is still in the WAL)."""
    m = Mirror.open(tmp_path / "m.db", checkpoints="litestream")
    m.indexes.defer(True)
    for start in range(1, 3001, 100):
        pages = [_article(i) for i in range(start, start + 100)]
        for p in pages:
            p["attributes"]["content"] = " ".join(WORDS) * 30  # ~2 KB a row: WAL > 1,000 frames
        write_page(m, ARTICLES, pages)
    m.indexes.defer(False)
    assert m.schema.fts_missing(["articles"]) == {}
    assert (tmp_path / "m.db-wal").stat().st_size > 1000 * 4096
    assert (tmp_path / "m.db").stat().st_size < 200 * 4096
    m.close()


def test_tables_the_caller_takes_back_are_built_in_the_mirror_and_not_copied(
    tmp_path: Path,
) -> None:
    """`steal`: what the thread has not started is built by the caller in place; the copy
    brings in only what the thread built, and both kinds search the same."""
    m = Mirror.open(tmp_path / "m.db")
    m.indexes.defer(True)
    write_page(m, ARTICLES, [_article(i) for i in range(1, 201)])
    write_page(m, DEALS, [_deal(i) for i in range(1, 201)])
    plan = m.schema.fts_missing(["articles", "deals"])
    nothing = SideBuild(m.path, plan)
    assert nothing.steal() == ["articles", "deals"]
    assert nothing.start().finish() == []  # nothing left for the thread: nothing copied
    split = SideBuild(m.path, plan)
    split._todo = ["articles"]  # as if the caller had already taken "deals"
    split.start()
    m.schema.ensure_fts(["deals"])
    assert split.finish() == ["articles"]
    assert m.schema.fts_missing(["articles", "deals"]) == {}
    for table in ("articles", "deals"):
        _integrity(m, table)
    assert _search(m, "articles", "amber") == _having("amber", 201)
    assert _search(m, "deals", "offer") == list(range(1, 201))
    m.close()
