"""`sync.store.fts`: an index built or rebuilt in one savepoint, and repairs of one left half made."""

from __future__ import annotations

import sqlite3

import pytest

from sync.store import Mirror, fts
from tests.support.store_units import rows


def _articles(mirror: Mirror) -> sqlite3.Connection:
    conn = mirror.conn
    conn.execute("CREATE TABLE articles (id INTEGER PRIMARY KEY, title TEXT, content TEXT)")
    conn.execute("INSERT INTO articles VALUES (1, 'amber', 'birch'), (2, 'cedar', 'amber')")
    return conn


def _names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type != 'index'")}


def _search(conn: sqlite3.Connection, word: str) -> list[tuple[object, ...]]:
    return rows(conn, "SELECT rowid FROM articles_fts WHERE articles_fts MATCH ? ORDER BY 1", word)


def test_the_searched_columns_are_those_the_table_has_in_index_order() -> None:
    assert fts.wanted("articles", {"content", "id", "title", "other"}) == ["title", "content"]
    assert fts.wanted("hours", {"description"}) == []


def test_a_failed_rebuild_leaves_the_index_it_replaced(mirror: Mirror) -> None:
    conn = _articles(mirror)
    fts.build(conn, "articles", ["title", "content"])
    assert _search(conn, "amber") == [(1,), (2,)]
    with pytest.raises(sqlite3.OperationalError, match="no such column"):
        fts.build(conn, "articles", ["title", "teaser"])  # the table has no teaser
    assert {"articles_fts", "articles_ai", "articles_ad", "articles_au"} <= _names(conn)
    conn.execute("UPDATE articles SET title = 'dune' WHERE id = 1")  # the triggers still work
    assert _search(conn, "dune") == [(1,)]
    assert _search(conn, "amber") == [(2,)]


def test_an_index_left_half_made_is_found_and_rebuilt(mirror: Mirror) -> None:
    conn = _articles(mirror)
    columns = {"articles": {"id", "title", "content"}}
    fts.build(conn, "articles", ["title", "content"])
    assert fts.repair(conn, columns, check=True) == []
    conn.execute("DROP TRIGGER articles_au")
    assert fts.incomplete(conn, "articles", _names(conn), check=False) == "its triggers are missing"
    assert fts.repair(conn, columns, check=False) == ["articles"]
    conn.execute("DROP TABLE articles_fts")
    assert fts.incomplete(conn, "articles", _names(conn), check=False) == (
        "its triggers were left without their index"
    )
    assert fts.repair(conn, columns, check=False) == ["articles"]
    assert _search(conn, "birch") == [(1,)]


def test_a_stale_index_is_caught_only_by_the_check(mirror: Mirror) -> None:
    conn = _articles(mirror)
    fts.build(conn, "articles", ["title", "content"])
    saved = [
        r[0]
        for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'articles_a_'"
        )
    ]
    for name in ("articles_ai", "articles_ad", "articles_au"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE articles SET title = 'ember' WHERE id = 1")  # unseen by the index
    for sql in saved:
        conn.execute(sql)
    assert fts.incomplete(conn, "articles", _names(conn), check=False) is None
    why = fts.incomplete(conn, "articles", _names(conn), check=True)
    assert why is not None and why.startswith("its integrity-check failed")
    assert fts.repair(conn, {"articles": {"id", "title", "content"}}, check=True) == ["articles"]
    assert _search(conn, "ember") == [(1,)]
