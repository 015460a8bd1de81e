"""`sync.store.scripts`: a type's `meta.scripts` stored by position, first sightings kept, the memo forgotten on rollback."""

from __future__ import annotations

import pytest

from sync.model import catalogue
from sync.store import Mirror
from sync.store.scripts import Scripts, SqliteScripts
from sync.store.transaction import write_transaction
from tests.support.store_units import rows

DEALS = catalogue.TYPES["deals"]
A = {"type": "js", "content": "a()"}
B = {"type": "css", "content": {"href": "b.css"}}


def _stored(mirror: Mirror) -> list[tuple[object, ...]]:
    return rows(
        mirror.conn,
        "SELECT type, channel, position, script_type, content FROM meta_scripts ORDER BY type, position",
    )


def test_a_script_that_moves_keeps_when_it_was_first_seen(mirror: Mirror) -> None:
    scripts = Scripts(SqliteScripts(mirror.conn))
    scripts.write(DEALS, [A])
    mirror.conn.execute("UPDATE meta_scripts SET first_seen_at = 'then'")
    scripts.write(DEALS, [B, A])
    assert _stored(mirror) == [
        ("deals", "deal", 0, "css", '{"href":"b.css"}'),
        ("deals", "deal", 1, "js", "a()"),
    ]
    assert rows(
        mirror.conn, "SELECT script_type FROM meta_scripts WHERE first_seen_at = 'then'"
    ) == [("js",)]


def test_a_list_that_is_not_a_list_leaves_the_type_s_scripts(mirror: Mirror) -> None:
    scripts = Scripts(SqliteScripts(mirror.conn))
    scripts.write(DEALS, [A, "not an object", B])
    scripts.write(DEALS, {"oops": 1})
    assert [r[3] for r in _stored(mirror)] == ["js", "css"]
    assert [r[2] for r in _stored(mirror)] == [0, 1]  # the bad item takes no position


def test_a_rolled_back_write_is_forgotten_so_the_same_list_is_written_again(mirror: Mirror) -> None:
    scripts = Scripts(SqliteScripts(mirror.conn))
    with pytest.raises(RuntimeError):
        with write_transaction(mirror.conn):
            scripts.write(DEALS, [A])
            raise RuntimeError("the page failed")
    assert _stored(mirror) == []
    assert not scripts.due(DEALS, [A])  # the memo still holds the rolled-back bytes
    scripts.forget()
    assert scripts.due(DEALS, [A]) and not scripts.due(DEALS, None)
    scripts.write(DEALS, [A])
    assert _stored(mirror) == [("deals", "deal", 0, "js", "a()")]
