"""`sync.store.opening`: the one place that chooses the store a target names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sync.core.errors import MirrorError
from sync.core.target import MirrorTarget
from sync.store import Mirror
from sync.store.opening import NO_PSYCOPG, open_mirror


def test_a_path_opens_the_sqlite_mirror(tmp_path: Path) -> None:
    mirror = open_mirror(MirrorTarget(path=tmp_path / "m.db"))
    try:
        assert isinstance(mirror, Mirror)
    finally:
        mirror.close()


def test_a_url_opens_the_postgresql_mirror(pg_db: str) -> None:
    from sync.store.pg.mirror import PgMirror

    mirror = open_mirror(MirrorTarget(url=pg_db, schema="ccsync"))
    try:
        assert isinstance(mirror, PgMirror)
        assert mirror.meta.get("schema_version")
    finally:
        mirror.close()
    reader = open_mirror(MirrorTarget(url=pg_db, schema="ccsync"), readonly=True)
    reader.close()


def test_a_url_without_psycopg_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith("sync.store.pg")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg: ImportError
    with pytest.raises(MirrorError) as caught:
        open_mirror(MirrorTarget(url="postgresql://u:secret@127.0.0.1:1/db"))
    assert str(caught.value).startswith(NO_PSYCOPG.split(";")[0])
    assert "sync[postgres]" in str(caught.value) and "secret" not in str(caught.value)
