"""`sync.store.opened`: the narrow shape of an open mirror is all the whole-file parts need."""

from __future__ import annotations

from pathlib import Path

from sync.store import Mirror, indexes, migrations
from sync.store.opened import OpenMirror
from sync.store.schema import Schema
from tests.support.store_units import Opened, staged, write

#: What the protocol declares: a stand-in with no more than these must do.
DECLARED = {"conn", "path", "schema", "meta", "group"}


class Bare(Opened):
    """`Opened` refusing any attribute the protocol does not declare."""

    def __getattribute__(self, name: str) -> object:
        if not name.startswith("__") and name not in DECLARED:
            raise AssertionError(f"{name} is not part of OpenMirror")
        return super().__getattribute__(name)


def test_the_protocol_declares_what_the_stand_in_offers() -> None:
    declared = set(OpenMirror.__annotations__) | {
        n for n in vars(OpenMirror) if not n.startswith("_")
    }
    assert declared == DECLARED


def test_the_end_phase_and_the_migrations_run_on_the_narrow_shape(
    mirror: Mirror, tmp_path: Path
) -> None:
    schema = Schema(mirror.conn)
    schema.defer_indexes = True  # a bulk load: no index yet
    write(
        mirror.conn,
        schema,
        staged(
            "deals",
            [
                {
                    "id": "1",
                    "type": "deals",
                    "attributes": {"title": "a", "updated_at": "2026-01-01T00:00:00.000Z"},
                }
            ],
        ),
    )
    opened: OpenMirror = Bare(mirror.conn, tmp_path / "m.db", schema)
    schema.defer_indexes = False
    indexes.create(opened)
    migrations.apply(opened)
    names = {r[0] for r in mirror.conn.execute("SELECT name FROM sqlite_master")}
    assert {"idx_deals_updated_at", "deals_fts", "_sync_changes_deals_insert"} <= names
