"""Readers without write access, made real: a read-only bind mount of a directory, and a
process in a directory's group that may not write there (as root, one without the
capabilities that let root ignore file permissions). Nothing is faked: the kernel refuses."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The owner and group given to a directory a group reader reads (root only).
OWNER_UID, GROUP_GID = 4241, 4242
#: The capabilities through which root reads and writes whatever the permissions say.
_OVERRIDES = "-dac_override,-dac_read_search,-fowner,-chown"


@contextlib.contextmanager
def read_only_mount(directory: Path) -> Iterator[Path]:
    """`directory` bind-mounted read-only at a sibling path (the mount point), unmounted
    afterwards; skips the test where mounting is not permitted (not root, no CAP_SYS_ADMIN)."""
    target = directory.with_name(directory.name + "-ro")
    target.mkdir()
    done = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(directory), str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or os.access(target, os.W_OK):
        if done.returncode == 0:
            subprocess.run(["umount", str(target)], check=False)
        pytest.skip(f"a read-only bind mount cannot be made here: {done.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=True)


def group_reader(directory: Path) -> list[str]:
    """Make `directory` the daemon's state directory as docs/service.md sets it up (owned by
    the service user, group-readable, setgid, nobody else), and return the command prefix
    that runs a process as a member of that group who may not write there."""
    if os.geteuid() != 0:
        directory.chmod(0o2550)  # this user's own directory, taken write access from
        for f in directory.iterdir():
            f.chmod(0o440)
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run a reader without root's overrides")
    for f in [directory, *directory.iterdir()]:
        os.chown(f, OWNER_UID, GROUP_GID)
        f.chmod(0o2750 if f.is_dir() else 0o640)
    return [
        setpriv,
        f"--bounding-set={_OVERRIDES}",
        f"--regid={GROUP_GID}",
        f"--groups={GROUP_GID}",
    ]
