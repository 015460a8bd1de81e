"""`sync.store.pg.scripts`: the PostgreSQL `meta_scripts` held to the SQLite one's contract.

The contract tests take `twin` and run twice (`tests.support.twin_books`): `sqlite` is
`sync.store.scripts.Scripts` over `SqliteScripts` on an SQLite mirror, `postgres` the same over
this module's `PgScripts` on a PostgreSQL schema made by `ensure_scripts`. Each asserts the same
of both: a type's list stored by position, as served (a value that is not a string as its JSON
text); written only when it changed (the same list is only seen again, and not even that within
`SAME_FOR`); a script that moves keeps when it was first seen; a list or item that is not one
refused without a failed page; a write rolled back forgotten and written again. The tests after
them are PostgreSQL's own: the table's shape against SQLite's, `ensure_scripts`, a list
replaced whole or not at all, and NUL in text.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from sync.model import catalogue
from sync.store import Mirror
from sync.store import scripts as sqlite_scripts
from sync.store.pg import scripts
from sync.store.pg.bookkeeping import SCHEMA, exists
from sync.store.pg.scripts import TABLES, PgScripts, Scripts, ensure_scripts
from tests.support.twin_books import SCHEMA as TWIN_SCHEMA
from tests.support.twin_books import Twin, shapes

DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]
A = {"type": "js", "content": "a()"}
B = {"type": "css", "content": {"href": "b.css"}}
C = {"content": 7}
STORED = (
    "SELECT type, channel, position, script_type, content FROM meta_scripts ORDER BY type, position"
)


def _scripts(twin: Twin) -> Any:
    """A new writer of the store's `meta_scripts`."""
    if twin.kind == "sqlite":
        return Scripts(sqlite_scripts.SqliteScripts(twin.conn))
    return Scripts(PgScripts(twin.conn, TWIN_SCHEMA))


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The writers' clock (`sync.store.scripts`'s), moved past `SAME_FOR` each time called."""
    now = [1000.0]

    def step() -> None:
        now[0] += sqlite_scripts.SAME_FOR + 1

    monkeypatch.setattr(sqlite_scripts, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return step


# -- the contract: both implementations ------------------------------------------------------


def test_a_list_is_stored_by_position_as_served(twin: Twin) -> None:
    s = _scripts(twin)
    s.write(DEALS, [A, B, C])
    s.write(STORES, [B])
    assert twin.raw(STORED) == [
        ("deals", "deal", 0, "js", "a()"),
        ("deals", "deal", 1, "css", '{"href":"b.css"}'),
        ("deals", "deal", 2, None, "7"),
        ("stores", "store", 0, "css", '{"href":"b.css"}'),
    ]
    stamps = twin.raw("SELECT DISTINCT first_seen_at = last_seen_at FROM meta_scripts")
    assert stamps == [(True,)] or stamps == [(1,)]


def test_a_list_is_written_only_when_it_changed(twin: Twin, later: Any) -> None:
    s = _scripts(twin)
    s.write(DEALS, [A])
    twin.raw("UPDATE meta_scripts SET first_seen_at = 'then', last_seen_at = 'then'")
    s.write(DEALS, [A])  # the same bytes a moment ago: nothing at all
    assert not s.due(DEALS, [A]) and s.due(DEALS, [B]) and not s.due(DEALS, None)
    assert twin.raw("SELECT first_seen_at, last_seen_at FROM meta_scripts") == [("then", "then")]
    later()
    assert s.due(DEALS, [A])
    s.write(DEALS, [A])  # the same list after a while: only seen again
    [(first, last)] = twin.raw("SELECT first_seen_at, last_seen_at FROM meta_scripts")
    assert first == "then" and last != "then"
    s.write(DEALS, None)  # no key: the list stays
    s.write(DEALS, [])  # an empty list: none
    assert twin.raw(STORED) == []


def test_a_script_that_moves_keeps_when_it_was_first_seen(twin: Twin) -> None:
    s = _scripts(twin)
    s.write(DEALS, [A])
    twin.raw("UPDATE meta_scripts SET first_seen_at = 'then'")
    with capture_logs() as logs:
        s.write(DEALS, [B, A])
    assert twin.raw(STORED) == [
        ("deals", "deal", 0, "css", '{"href":"b.css"}'),
        ("deals", "deal", 1, "js", "a()"),
    ]
    firsts = "SELECT script_type FROM meta_scripts WHERE first_seen_at = 'then'"
    assert twin.raw(firsts) == [("js",)]
    assert [(e["event"], e["scripts"], e["removed"]) for e in logs] == [("scripts.changed", 2, 0)]
    s.write(DEALS, [B])
    assert twin.raw(STORED) == [("deals", "deal", 0, "css", '{"href":"b.css"}')]


def test_a_list_that_is_not_a_list_leaves_the_types_scripts(twin: Twin) -> None:
    s = _scripts(twin)
    with capture_logs() as logs:
        s.write(DEALS, [A, "not an object", B])
        s.write(DEALS, {"oops": 1})
    assert [r[3] for r in twin.raw(STORED)] == ["js", "css"]
    assert [r[2] for r in twin.raw(STORED)] == [0, 1]  # the bad item takes no position
    assert [e["event"] for e in logs] == ["scripts.item_skipped", "scripts.refused"]


def test_a_rolled_back_write_is_forgotten_so_the_same_list_is_written_again(twin: Twin) -> None:
    s = _scripts(twin)
    with pytest.raises(RuntimeError), twin.atomic():
        s.write(DEALS, [A])
        raise RuntimeError("the page failed")
    assert twin.raw(STORED) == []
    assert not s.due(DEALS, [A])  # the memo still holds the rolled-back bytes
    s.forget()
    assert s.due(DEALS, [A])
    s.write(DEALS, [A])
    assert twin.raw(STORED) == [("deals", "deal", 0, "js", "a()")]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_table_has_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """`meta_scripts` as SQLite has it, the type and stamps compared byte by byte."""
    ensure_scripts(conn)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        [(lite, pg, bytewise)] = shapes(conn, SCHEMA, mirror.conn, list(TABLES)).values()
    finally:
        mirror.close()
    assert pg == lite
    assert bytewise == {"type", "first_seen_at", "last_seen_at"}


def test_ensure_is_idempotent_and_keeps_what_is_there(conn: psycopg.Connection[Any]) -> None:
    schema = 'Odd "schema"'
    ensure_scripts(conn, schema)
    Scripts(PgScripts(conn, schema)).write(DEALS, [A])
    ensure_scripts(conn, schema)
    assert conn.execute('SELECT content FROM "Odd ""schema""".meta_scripts').fetchall() == [
        ("a()",)
    ]
    assert not exists(conn, scripts.SCHEMA, "meta_scripts")  # only the schema given


def test_a_list_replaced_is_replaced_whole_or_not_at_all(conn: psycopg.Connection[Any]) -> None:
    """In autocommit the delete and the inserts are still one transaction: an insert that fails
    leaves the list as it was, never the type without its scripts."""
    ensure_scripts(conn)
    s = Scripts(PgScripts(conn))
    s.write(DEALS, [A])
    conn.execute(
        f"ALTER TABLE \"{SCHEMA}\".meta_scripts ADD CONSTRAINT no_css CHECK (script_type <> 'css')"
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        s.write(DEALS, [A, B])
    assert conn.execute(f'SELECT content FROM "{SCHEMA}".meta_scripts').fetchall() == [("a()",)]


def test_nul_in_a_script_is_kept_and_the_same_list_not_rewritten(
    conn: psycopg.Connection[Any], later: Any
) -> None:
    ensure_scripts(conn)
    s = Scripts(PgScripts(conn))
    s.write(DEALS, [{"type": "js", "content": "a\x00b"}])
    assert conn.execute(f'SELECT content FROM "{SCHEMA}".meta_scripts').fetchall() == [
        ("a\ufffdb",)
    ]
    later()
    with capture_logs() as logs:
        s.write(DEALS, [{"type": "js", "content": "a\x00b"}])
    assert logs == []  # held as served: seen again, not replaced
