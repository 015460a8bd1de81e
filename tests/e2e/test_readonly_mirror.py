"""A healthy mirror where its reader may not write (#48): on a read-only mount, and in the
daemon's directory read by a member of its group with no daemon running, `ccsync status` and
`ccsync changes` read it, change nothing, and never call it damaged; a writer meeting a
directory that takes no writes exits 4, as every other storage fault does."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from sync.commands.wiring import EXIT_STORAGE
from sync.emulator import Emulator
from sync.model import catalogue
from sync.store import Mirror
from tests.support.pages import write_page
from tests.support.processes import ccsync, run
from tests.support.readonly import group_reader, read_only_mount
from tests.support.settings import upstream_keys, write_config


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The daemon's state directory after it stopped: a mirror with one deal, no -wal, no -shm."""
    directory = tmp_path / "state"
    directory.mkdir()
    m = Mirror.open(directory / "mirror.db")
    deal = {
        "id": "1",
        "type": "deals",
        "attributes": {"title": "t", "updated_at": "2026-01-01T00:00:00.000Z"},
    }
    write_page(m, catalogue.TYPES["deals"], [deal])
    m.close()
    return directory


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", ["status", "changes"])
async def test_a_mirror_on_a_read_only_mount_is_read(state: Path, command: str) -> None:
    before = _md5(state / "mirror.db")
    with read_only_mount(state) as ro:
        code, out, err = await run(command, "--mirror", str(ro / "mirror.db"))
    assert code == 0, err
    assert "damaged" not in err
    assert "deals" in out
    assert _md5(state / "mirror.db") == before


@pytest.mark.parametrize("command", ["status", "changes"])
async def test_a_group_reader_reads_with_no_daemon_running(state: Path, command: str) -> None:
    prefix = group_reader(state)
    code, out, err = await run(command, "--mirror", str(state / "mirror.db"), prefix=prefix)
    assert code == 0, err
    assert "deals" in out
    assert sorted(p.name for p in state.iterdir()) == ["mirror.db", "mirror.db.lock"]


async def test_commits_only_a_writer_can_apply_are_named_not_called_damage(
    tmp_path: Path, state: Path
) -> None:
    """A -wal with frames and no -shm beside it (its writer killed, the index removed)."""
    writer = sqlite3.connect(state / "mirror.db")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE deals SET title = 'u'")
    writer.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("mirror.db", "mirror.db-wal"):
        shutil.copy(state / name, copy / name)
    writer.close()
    with read_only_mount(copy) as ro:
        code, _, err = await run("status", "--mirror", str(ro / "mirror.db"))
    assert code == 1
    assert "damaged" not in err
    assert "only a writer can apply" in err
    assert err.count("\n") == 1


async def test_a_mirror_to_be_made_in_a_read_only_directory_is_a_storage_fault(
    emulator: Emulator, tmp_path: Path
) -> None:
    """One rule for a mirror that cannot take writes (docs/commands.md): exit 4, one line."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with read_only_mount(empty) as ro:
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream=upstream_keys(emulator, "CLI_PW", types=["malls"]),
            mirror={"path": ro / "m.db"},
            webhooks={"enabled": False},
        )
        code, _, err = await ccsync("backfill", "--quiet", "--config", str(cfg), emu=emulator)
    assert code == EXIT_STORAGE, err
    assert err.count("\n") == 1 and err.startswith(f"ccsync: {ro / 'm.db'}: ")
    assert "does not take writes" in err and "Traceback" not in err
