"""One writer per mirror file, whatever path names it (#31): a symlink, a hard link or a
`dir/../` spelling of a held mirror is refused, and the refusal names the holder's pid and
command line; SQLite's own locks and the writer lock never meet."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from sync.core.errors import MirrorError
from sync.model import catalogue
from sync.store import Mirror
from tests.support.pages import write_page
from tests.support.paths import ROOT

DEALS = catalogue.TYPES["deals"]
NAMES = ("symlink", "hard link", "dir/../")

#: A small writer of its own: holds the mirror open until its stdin closes.
HOLDER = (
    "import sys\n"
    "from sync.store import Mirror\n"
    "m = Mirror.open(sys.argv[1])\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
    "m.close()\n"
)


def _deal(rid: int) -> dict[str, object]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": f"deal {rid}", "updated_at": "2024-01-01T00:00:00.000Z"},
    }


@pytest.fixture
def mirror_file(tmp_path: Path) -> Path:
    db = tmp_path / "data" / "m.db"
    db.parent.mkdir()
    m = Mirror.open(db)
    write_page(m, DEALS, [_deal(1)])
    m.close()
    return db


def _other_names(db: Path, tmp_path: Path) -> list[Path]:
    """Three other names of the same file: a symlink, a hard link and a `dir/../` path."""
    link = tmp_path / "link.db"
    link.symlink_to(db)
    hard = tmp_path / "hard.db"
    os.link(db, hard)
    (tmp_path / "elsewhere").mkdir()
    dotted = tmp_path / "elsewhere" / ".." / "data" / "m.db"
    return [link, hard, dotted]


@pytest.mark.parametrize("name", NAMES)
def test_a_second_writer_through_another_name_is_refused_with_the_pid(
    mirror_file: Path, tmp_path: Path, name: str
) -> None:
    """A writer holds the mirror; a second `Mirror.open` through a symlink, a hard link or a
    `dir/../` path is refused, naming this process's pid, and writes nothing."""
    names = dict(zip(NAMES, _other_names(mirror_file, tmp_path), strict=True))
    other = names[name]
    holder = Mirror.open(mirror_file)
    try:
        with pytest.raises(MirrorError) as caught:
            Mirror.open(other)
        text = str(caught.value)
        assert f"mirror {other} is in use by another sync process" in text
        assert f"pid {os.getpid()}" in text
        assert "stop the other process" in text
        if name != "hard link":  # SQLite names a WAL after the path: readers use one name
            reader = Mirror.open(other, readonly=True)  # readers are always welcome
            assert reader.table("deals").count() == 1
            reader.close()
    finally:
        holder.close()
    with capture_logs() as logs:
        again = Mirror.open(other)  # released: the next writer gets it, by any name
    again.close()
    warned = [e for e in logs if e["event"] == "mirror.hard_links"]
    assert [e["links"] for e in warned] == [2]  # `_other_names` made one hard link


@pytest.fixture
def subprocess_holder(mirror_file: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(mirror_file)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


def test_a_holder_in_another_process_is_named_by_pid_and_command_line(
    mirror_file: Path, tmp_path: Path, subprocess_holder: subprocess.Popen[str]
) -> None:
    """Another process holds the mirror: each other name of the file is refused with that
    process's pid and command line, and the mirror is not written."""
    for other in [mirror_file, *_other_names(mirror_file, tmp_path)]:
        with pytest.raises(MirrorError) as caught:
            Mirror.open(other)
        text = str(caught.value)
        assert f"mirror {other} is in use by another sync process" in text
        assert f"pid {subprocess_holder.pid} (`{sys.executable} -c" in text
    conn = sqlite3.connect(f"file:{mirror_file}?mode=ro", uri=True)
    assert conn.execute("select count(*) from deals").fetchone()[0] == 1
    conn.close()


def test_sqlite_locks_and_the_writer_lock_do_not_meet(
    mirror_file: Path, subprocess_holder: subprocess.Popen[str]
) -> None:
    """The writer lock is a `flock` on the database file and SQLite locks it with POSIX
    record locks; on Linux the two are independent: while another process holds the writer
    lock, a plain SQLite connection still reads, and even writes, the file."""
    conn = sqlite3.connect(mirror_file, isolation_level=None, timeout=5)
    try:
        assert conn.execute("select count(*) from deals").fetchone()[0] == 1
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("insert into _sync_meta (key, value) values ('probe', '1')")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_bind_mount_of_the_directory_is_refused_too(mirror_file: Path, tmp_path: Path) -> None:
    """The lock is the inode's: the same file seen through a bind mount is refused too (run
    where `mount --bind` is allowed, as root in a sandbox; skipped elsewhere)."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    view = tmp_path / "view"
    view.mkdir()
    mounted = subprocess.run(
        ["mount", "--bind", str(mirror_file.parent), str(view)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        holder = Mirror.open(mirror_file)
        try:
            with pytest.raises(
                MirrorError, match=f"in use by another sync process: pid {os.getpid()}"
            ):
                Mirror.open(view / mirror_file.name)
        finally:
            holder.close()
    finally:
        subprocess.run(["umount", str(view)], check=True)
