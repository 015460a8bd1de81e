"""`sync.store.ftsbuild`: a side build copied in whole or not at all, and its scratch files always removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.store import Mirror
from sync.store.ftsbuild import SideBuild, remove_scratch
from tests.support.store_units import rows

PLAN = {"articles": ["title"], "deals": ["title"]}


def _tables(mirror: Mirror) -> None:
    for table in PLAN:
        mirror.conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, title TEXT)")
        mirror.conn.execute(f"INSERT INTO {table} VALUES (1, 'amber'), (2, 'birch')")


def _fts(mirror: Mirror) -> list[tuple[object, ...]]:
    return rows(mirror.conn, "SELECT name FROM sqlite_master WHERE name LIKE '%fts%' ORDER BY 1")


def test_a_copy_that_fails_part_way_brings_in_no_index(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tables(mirror)
    mirror.conn.execute("CREATE TABLE deals_fts (x)")  # the second copy's CREATE fails
    side = SideBuild(tmp_path / "m.db", PLAN).start()
    assert side.finish() == []
    assert "mirror.fts_copy_failed" in capsys.readouterr().out
    assert _fts(mirror) == [("deals_fts",)]  # articles_fts was rolled back with it
    assert not (tmp_path / "m.db-fts-build").exists()


def test_a_build_not_copied_leaves_the_mirror_as_it_was(mirror: Mirror, tmp_path: Path) -> None:
    _tables(mirror)
    side = SideBuild(tmp_path / "m.db", PLAN).start()
    assert side.finish(copy=False) == []
    assert side.built == ["articles", "deals"]  # built on the side, then dropped
    assert _fts(mirror) == []
    assert not (tmp_path / "m.db-fts-build").exists()


def test_every_scratch_file_of_a_killed_build_is_removed(tmp_path: Path) -> None:
    mirror = tmp_path / "m.db"
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{mirror}-fts-build{suffix}").write_bytes(b"left")
    (tmp_path / "m.db-wal").write_bytes(b"the mirror's own")
    remove_scratch(mirror)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db-wal"]
