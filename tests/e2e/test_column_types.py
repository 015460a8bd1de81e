"""Column types come from the spec, not from the first value seen (issue 20)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from sync.model import catalogue
from sync.model.columns import DECLARED, NULLABLE
from sync.store import Mirror
from sync.store.schema import affinity
from tests.support.backfilled import backfill
from tests.support.pages import write_page

#: What typeof() may say of a value in a column of each declared affinity.
ALLOWED = {"TEXT": {"text", "null"}, "INTEGER": {"integer", "null"}, "REAL": {"real", "null"}}


async def test_a_first_page_of_nulls_still_gets_the_spec_types(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=3000, seed=4) as emu:
        emu.data.null_first(rows=20)  # social feeds are few: keep later rows non-null
        first = emu.ids("social_feeds")[0]
        assert emu.snapshot("social_feeds")[first]["is_active"] is None
        db = tmp_path / "m.db"
        await backfill(emu, db)
    conn = sqlite3.connect(db)
    checked = 0
    for table, columns in DECLARED.items():
        have = {r[1]: affinity(r[2]) for r in conn.execute(f"PRAGMA table_info([{table}])")}
        assert have, f"{table} was not mirrored"
        for column, want in columns.items():
            if column not in have:
                continue
            assert have[column] == want, f"{table}.{column} is {have[column]}, spec says {want}"
            kinds = {
                r[0] for r in conn.execute(f"SELECT DISTINCT typeof([{column}]) FROM [{table}]")
            }
            assert kinds <= ALLOWED[want], f"{table}.{column} holds {kinds}"
            checked += 1
    for table, names in NULLABLE.items():
        for name in names:
            assert name in {r[1] for r in conn.execute(f"PRAGMA table_info([{table}])")}
    # The later rows of the null-first type keep their booleans as integers, not '1'.
    kinds = {
        r[0]
        for r in conn.execute("SELECT typeof(is_active) FROM social_feeds WHERE id > ?", (first,))
    }
    assert kinds <= {"integer", "null"} and "integer" in kinds
    conn.close()
    assert checked > 150


def test_an_older_mirror_with_text_booleans_is_migrated_in_place(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        """
        CREATE TABLE social_feeds (id INTEGER PRIMARY KEY, name TEXT, is_active TEXT,
            updated_at TEXT, mall_id INTEGER);
        INSERT INTO social_feeds VALUES (1, 'a', NULL, '2026-01-01T00:00:00.000Z', 3),
            (2, 'b', '1', '2026-01-01T00:00:00.000Z', 3), (3, 'c', '0', NULL, 4);
        CREATE INDEX idx_social_feeds_mall_id ON social_feeds (mall_id);
        CREATE TABLE malls (id INTEGER PRIMARY KEY, name TEXT, distance TEXT);
        INSERT INTO malls VALUES (1, 'm', '10.2'), (2, 'n', '3.5'), (3, 'o', NULL);
        """
    )
    conn.commit()
    conn.close()
    with capture_logs() as logs:
        m = Mirror.open(db)
    changed = {e["table"] for e in logs if e["event"] == "mirror.column_types_changed"}
    assert changed == {"social_feeds", "malls"}
    rows = list(m.conn.execute("SELECT id, name, is_active, typeof(is_active) FROM social_feeds"))
    assert rows == [(1, "a", None, "null"), (2, "b", 1, "integer"), (3, "c", 0, "integer")]
    nearest = [r[0] for r in m.conn.execute("SELECT id FROM malls ORDER BY distance")]
    assert nearest == [3, 2, 1]  # numbers order as numbers: 3.5 before 10.2
    m.close()
    # Opening again changes nothing.
    with capture_logs() as logs:
        Mirror.open(db).close()
    assert not [e for e in logs if e["event"] == "mirror.column_types_changed"]


def test_unknown_attributes_are_inferred_and_widened_never_mixed(tmp_path: Path) -> None:
    m = Mirror.open(tmp_path / "m.db")
    deals = catalogue.TYPES["deals"]

    def write(rid: int, value: Any) -> None:
        attrs = {"title": "t", "updated_at": "2026-01-01T00:00:00.000Z", "new_attr": value}
        write_page(m, deals, [{"id": str(rid), "type": "deals", "attributes": attrs}])

    def state() -> tuple[str, set[str]]:
        kind = {r[1]: r[2] for r in m.conn.execute("PRAGMA table_info(deals)")}["new_attr"]
        values = {r[0] for r in m.conn.execute("SELECT typeof(new_attr) FROM deals")}
        return affinity(kind), values - {"null"}

    write(1, None)
    assert state() == ("", set())  # all null so far: untyped, typed by the first value
    write(2, 3)
    assert state() == ("INTEGER", {"integer"})
    write(3, 2.5)
    assert state() == ("REAL", {"real"})
    write(4, "x")
    assert state() == ("TEXT", {"text"})
    assert m.table("deals").count() == 4
    m.close()
