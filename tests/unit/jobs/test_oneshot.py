"""`sync.jobs.oneshot`: a one-shot job's mirror is opened before its client and closed on the
way out, whatever the job did; one it created and never logged in for is removed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sync.core.config import Settings, parse_config
from sync.core.errors import MirrorError
from sync.jobs.oneshot import connected
from sync.store import Mirror


def _settings(db: Path) -> Settings:
    return parse_config(
        {
            "upstream": {"base_url": "http://127.0.0.1:9", "email": "a@b.c", "password": "x"},
            "mirror": {"path": str(db)},
        }
    )


async def test_the_mirror_is_open_inside_and_closed_after_a_failure(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with pytest.raises(RuntimeError, match="the job failed"):
        async with connected(_settings(db)) as (client, mirror):
            assert client.session.settings.base_url == "http://127.0.0.1:9"
            assert mirror.conn.execute("SELECT count(*) FROM _sync_meta").fetchone()[0] >= 0
            kept = mirror
            raise RuntimeError("the job failed")
    with pytest.raises(sqlite3.ProgrammingError):
        kept.conn.execute("SELECT 1")
    # Created here and never logged in: removed with its -wal, -shm and .lock.
    assert list(tmp_path.iterdir()) == []


async def test_a_mirror_that_existed_is_kept_whatever_failed(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    Mirror.open(db).close()
    with pytest.raises(RuntimeError, match="the job failed"):
        async with connected(_settings(db)):
            raise RuntimeError("the job failed")
    assert db.exists()


async def test_a_mirror_that_cannot_be_opened_fails_before_the_client(tmp_path: Path) -> None:
    """A directory where the file should be: the mirror's error, no client built."""
    where = tmp_path / "m.db"
    where.mkdir()
    entered = False
    with pytest.raises(MirrorError):
        async with connected(_settings(where)):
            entered = True
    assert entered is False
