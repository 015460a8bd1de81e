"""`sync.store.pg.press`: the PostgreSQL press releases held to the SQLite ones' contract.

The contract tests take `store` and run twice: `sqlite` is a `Mirror` opened on a file in the
test's directory (`mirror.press`), `postgres` this module's `PressTables` on a fresh database
(`pg_db`, autocommit) in a schema with an awkward name. Each asserts the same of both: a page
per locale with its structures as JSON, categories replaced per locale, what a prune removes
and what an empty listing keeps. `Store.rows` reads the tables with one statement written once
for both, a JSON column decoded (text in SQLite, jsonb here). The tests after them are
PostgreSQL's own: the tables' shape, and NUL in text and in JSON.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from sync.store import Mirror, press
from sync.store.pg.bookkeeping import exists
from sync.store.pg.press import PressReleases, PressTables, ensure_press
from tests.support.rawsql import pg_rolled_back, pg_run, sqlite_rolled_back

SCHEMA = 'Press "p"'
AFFINITY = {"INTEGER": "bigint", "TEXT": "text"}


def _release(rid: int, *categories: Any, **more: Any) -> dict[str, Any]:
    return {"id": rid, "title": f"t{rid}", "category_ids": list(categories), **more}


@dataclass
class Store:
    """One implementation's press tables, and what a test needs behind them."""

    kind: str
    tables: Any
    #: The rows of one statement on the tables (named bare, `?` placeholders), JSON decoded.
    rows: Callable[..., list[tuple[Any, ...]]]
    has_table: Callable[[str], bool]
    rolled_back: Callable[[], contextlib.AbstractContextManager[None]]


def _decoded(value: Any, column: str) -> Any:
    """A value read from SQLite: its JSON columns' text decoded."""
    return orjson.loads(value) if column in press.JSON_COLUMNS and value is not None else value


def _sqlite(tmp_path: Path) -> Iterator[Store]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn = mirror.conn

    def rows(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = conn.execute(statement, params)
        names = [d[0] for d in cur.description]
        return [tuple(_decoded(v, c) for v, c in zip(r, names, strict=True)) for r in cur]

    def has_table(name: str) -> bool:
        return bool(rows("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name))

    rolled_back = sqlite_rolled_back(conn)

    try:
        yield Store("sqlite", mirror.press, rows, has_table, rolled_back)
    finally:
        mirror.close()


def _run(conn: psycopg.Connection[Any], statement: str, params: Any) -> list[tuple[Any, ...]]:
    return pg_run(conn, SCHEMA, r"mgmt_press_\w+", statement, params)


def _postgres(dsn: str) -> Iterator[Store]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rolled_back = pg_rolled_back(conn)

        yield Store(
            "postgres",
            PressTables(conn, SCHEMA),
            lambda statement, *params: _run(conn, statement, params),
            lambda name: exists(conn, SCHEMA, name),
            rolled_back,
        )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The press tables of either mirror, not yet made (the PostgreSQL server is started only
    for the `postgres` runs)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_db"))


# -- the contract: both implementations ------------------------------------------------------


def test_the_tables_are_made_on_first_use_only(store: Store) -> None:
    assert not store.has_table(press.TABLE) and not store.has_table(press.CATEGORIES)
    store.tables.open()
    store.tables.open()  # again: nothing more
    assert store.has_table(press.TABLE) and store.has_table(press.CATEGORIES)


def test_a_page_is_stored_per_locale_with_json_for_structures(store: Store) -> None:
    releases = store.tables.open()
    assert (
        releases.write("en", "r1", [_release(1, 4, 5, "x", image={"url": "u"}, headline=["a"])])
        == 1
    )
    releases.write("fr", "r1", [_release(1, 4)])
    assert store.rows(
        "SELECT id, locale, title, headline, image, category_ids, attachments, seen_run"
        " FROM mgmt_press_releases ORDER BY locale"
    ) == [
        (1, "en", "t1", '["a"]', {"url": "u"}, [4, 5, "x"], None, "r1"),
        (1, "fr", "t1", None, None, [4], None, "r1"),
    ]
    assert store.rows("SELECT image IS NULL, fetched_at IS NULL FROM mgmt_press_releases") == [
        (False, False),  # absent is the JSON null, as SQLite's text 'null'
        (False, False),
    ]
    releases.write("en", "r2", [_release(1, 6)])  # categories replaced for that locale only
    assert store.rows(
        "SELECT locale, category_id FROM mgmt_press_releases_categories ORDER BY 1, 2"
    ) == [("en", 6), ("fr", 4)]


def test_a_release_given_twice_in_a_page_is_its_last_copy(store: Store) -> None:
    releases = store.tables.open()
    n = releases.write(
        "en", "r1", [_release(1, 3, title="first"), _release(2), _release(1, 4, 4, body="b")]
    )
    assert n == 3
    assert store.rows(
        "SELECT id, title, body, category_ids FROM mgmt_press_releases ORDER BY id"
    ) == [(1, "t1", "b", [4, 4]), (2, "t2", None, [])]
    assert store.rows(
        "SELECT press_release_id, category_id FROM mgmt_press_releases_categories ORDER BY 1, 2"
    ) == [(1, 3), (1, 4)]  # every category the page named for it, once each
    assert releases.write("en", "r1", []) == 0


def test_a_field_that_is_not_text_is_kept_as_its_json(store: Store) -> None:
    releases = store.tables.open()
    releases.write("en", "r1", [_release(1, teaser={"b": 1}, url=7, slug="s")])
    assert store.rows("SELECT teaser, url, slug FROM mgmt_press_releases") == [
        ('{"b":1}', "7", "s")
    ]


def test_only_rows_unseen_and_proven_gone_are_pruned(store: Store) -> None:
    releases = store.tables.open()
    releases.write("en", "r1", [_release(1, 7), _release(2, 8), _release(3)])
    releases.write("de", "r1", [_release(2)])
    releases.write("en", "r2", [_release(1, 7)])
    assert releases.unseen("en", "r2") == [2, 3]
    assert releases.unseen("de", "r2") == [2]
    assert releases.prune("en", "r2", listed=1, proven=[2, 1, 2]) == 1  # 1 was seen: kept
    assert store.rows("SELECT id, locale FROM mgmt_press_releases ORDER BY locale, id") == [
        (2, "de"),
        (1, "en"),
        (3, "en"),
    ]
    assert store.rows("SELECT press_release_id FROM mgmt_press_releases_categories") == [(1,)]
    assert releases.prune("en", "r2", listed=1, proven=[]) == 0


def test_an_empty_listing_never_empties_the_table(store: Store) -> None:
    releases = store.tables.open()
    releases.write("en", "r1", [_release(1)])
    assert releases.prune("en", "r2", listed=0, proven=[1]) == 0
    assert releases.unseen("en", "r2") == [1]
    assert releases.prune("fr", "r2", listed=0, proven=[1]) == 0  # no rows there: nothing to do


def test_a_page_written_inside_a_transaction_goes_with_it(store: Store) -> None:
    releases = store.tables.open()
    with store.rolled_back():
        releases.write("en", "r1", [_release(1, 2)])
    assert store.rows("SELECT count(*) FROM mgmt_press_releases") == [(0,)]
    assert store.rows("SELECT count(*) FROM mgmt_press_releases_categories") == [(0,)]


# -- the shared rules --------------------------------------------------------------------------


def test_the_rows_are_built_once_for_both() -> None:
    (row,) = press.release_rows("en", "r", [_release(1, 2, True, "x")], "t")
    assert dict(zip(press.COLUMNS, row, strict=True))["category_ids"] == '[2,true,"x"]'
    assert press.category_rows("en", [_release(1, 2, True, "x")]) == [(1, "en", 2), (1, "en", 1)]
    assert press.keeps_all(0, 3) and not press.keeps_all(0, 0) and not press.keeps_all(1, 3)


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_tables_have_sqlites_names_columns_and_indexes(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """SQLite's columns in its order; the JSON ones jsonb, keys and stamps compared byte by
    byte."""
    ensure_press(conn, SCHEMA)
    lite = sqlite3.connect(tmp_path / "m.db")
    try:
        press.PressReleases(lite)
        for table in (press.TABLE, press.CATEGORIES):
            want = [
                (r[1], "jsonb" if r[1] in press.JSON_COLUMNS else AFFINITY[r[2]])
                for r in lite.execute(f"PRAGMA table_info({table})")
            ]
            got = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (SCHEMA, table),
            ).fetchall()
            assert got == want, table
            indexes = {
                r[0]
                for r in lite.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
                    " AND sql IS NOT NULL",
                    (table,),
                )
            }
            pg = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
                (SCHEMA, table),
            ).fetchall()
            assert {r[0] for r in pg} - {f"{table}_pkey"} == indexes
    finally:
        lite.close()
    collated = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = %s AND collation_name = 'C' ORDER BY 1",
        (SCHEMA, press.TABLE),
    ).fetchall()
    assert [r[0] for r in collated] == ["fetched_at", "locale", "seen_run"]


def test_nul_in_text_and_json_is_kept_as_a_replacement_character(
    conn: psycopg.Connection[Any],
) -> None:
    releases = PressReleases(conn, SCHEMA)
    releases.write("en", "r\x00", [_release(1, title="a\x00b", image={"u\x00": ["\x00"]})])
    assert _run(conn, "SELECT title, image, seen_run FROM mgmt_press_releases", ()) == [
        ("a\ufffdb", {"u\ufffd": ["\ufffd"]}, "r\ufffd")
    ]
    assert releases.unseen("en", "r\x00") == []
