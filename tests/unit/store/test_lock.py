"""`sync.store.lock`: one writer lock per file whatever its name, a refusal naming the holder, released cleanly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sync.core.errors import MirrorError
from sync.store import lock


def _take(p: Path) -> lock.WriterLock:
    fd = lock.open_database(p)
    try:
        return lock.take(p, fd)
    except BaseException:
        os.close(fd)
        raise


def test_a_second_taker_by_another_name_is_refused_with_the_holder_s_pid(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    held = _take(p)
    (tmp_path / "alias.db").symlink_to(p)
    try:
        with pytest.raises(MirrorError) as caught:
            _take(tmp_path / "alias.db")
        assert caught.value.message.startswith(
            f"mirror {tmp_path / 'alias.db'} is in use by another sync process: pid {os.getpid()} (`"
        )
        assert caught.value.hint == "stop the other process, or point [mirror] path at another file"
        assert (tmp_path / "m.db.lock").read_text().split()[0] == str(os.getpid())
    finally:
        held.release()
    assert (tmp_path / "m.db.lock").read_text() == ""  # cleared before the unlock
    again = _take(tmp_path / "alias.db")
    again.release()
    again.release()  # twice is harmless
    assert (again.fd, again.info) == (-1, -1)


def test_the_holder_is_known_without_taking_anything(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    assert lock.holder_pid(p) is None
    held = _take(p)
    try:
        assert lock.holder_pid(p) == os.getpid()
        assert held.head(4) == b""  # an empty file: an empty database
    finally:
        held.release()
    assert lock.holder_pid(p) is None


def test_a_command_line_is_one_clipped_line() -> None:
    line = lock.command_of(os.getpid())
    assert line and "\n" not in line and "\0" not in line and len(line) <= 200
    assert lock.command_of(2**22 + 12345) == ""  # no such process
