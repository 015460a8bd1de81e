"""One writer per mirror file, whatever path names it.

The writer lock is an exclusive `flock` on a descriptor of the database file itself. The kernel
keys it on the open file, so on the inode: a symlink, a hard link, a `dir/../` spelling or a bind
mount of the mirror all meet the same lock. (A lock file named after the path did not: `ccsync
backfill` through a symlink to the daemon's mirror ran and wrote.) SQLite locks the same file
with POSIX record locks (`fcntl`); on Linux those and `flock` locks are independent (flock(2)),
so neither ever waits for the other (`tests/e2e/test_faults_lock.py` checks it).

A refusal names the holder: its pid as `/proc/locks` gives it for the inode (Linux), else as
the holder wrote it, with its command line, into `<real path>.lock` beside the file (a file
left by a holder killed with SIGKILL may be stale; the kernel's table never is). That file is
still `flock`ed as before, so an older `sync` holding the mirror by that name keeps this one
out too.

Closing any descriptor of a file releases every POSIX lock the process holds on it (fcntl(2)),
SQLite's included. So the database descriptor is opened before the mirror's connection, serves
the header check (`Mirror.open` opens the file no second time), and is closed only after the
connection (`WriterLock.release`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from sync.core.errors import MirrorError
from sync.store.faults import READ_ONLY, fault

#: The command line shown in a refusal, at most.
_CMDLINE_CHARS = 200


@dataclass
class WriterLock:
    """The held lock: the database's descriptor and the holder file beside its real path."""

    fd: int
    info: int

    def head(self, size: int) -> bytes:
        """The database file's first `size` bytes, read through the locked descriptor."""
        return os.pread(self.fd, size, 0)

    def release(self) -> None:
        """Clear the holder file, then unlock; call after the mirror's connection is closed."""
        for fd in (self.info, self.fd):
            if fd < 0:
                continue
            with contextlib.suppress(OSError):
                if fd == self.info:
                    os.ftruncate(fd, 0)  # before the unlock: the next holder writes after it
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fd = self.info = -1


def open_database(p: Path) -> int:
    """A descriptor of the database file, created empty if missing (an empty file is an empty
    SQLite database). Read-only: `flock` needs no more, and a read-only file is then refused by
    SQLite's own first write, with its own message; a directory that takes no writes is a
    `read_only` storage fault, as that write's would be."""
    try:
        return os.open(p, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if not p.exists():
            raise _unwritable(p, exc) from None
        raise MirrorError(
            f"mirror {p} cannot be read: {exc.strerror}", hint="check its owner and permissions"
        ) from None


def _unwritable(p: Path, exc: OSError) -> MirrorError:
    """A file the writer cannot create beside the mirror: a directory that takes no writes
    (read-only, or not this user's) is a `read_only` storage fault (exit 4), as SQLite's own
    read-only write is; anything else (`/proc`) is named as it is."""
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return fault(READ_ONLY, p, exc.strerror or str(exc), then="then run the command again")
    return MirrorError(
        f"cannot write beside mirror {p} ({exc.strerror}): the directory is read-only",
        hint="give the sync user write access to the directory, or move [mirror] path",
    )


def holder_file(p: Path) -> Path:
    """`<real path>.lock`, where a holder writes its pid and command line."""
    return Path(os.path.realpath(p) + ".lock")


def take(p: Path, fd: int) -> WriterLock:
    """Lock the database open on `fd` (named `p` by the caller) for this process, or raise a
    MirrorError naming the holder. On failure `fd` is left open for the caller to close."""
    info_path = holder_file(p)
    try:
        info = os.open(info_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise _unwritable(info_path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            fcntl.flock(info, fcntl.LOCK_EX | fcntl.LOCK_NB)  # an older sync's lock
        except OSError:
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise
    except OSError:
        holder = _holder(info, fd)
        os.close(info)
        raise MirrorError(
            f"mirror {p} is in use by another sync process{holder}",
            hint="stop the other process, or point [mirror] path at another file",
        ) from None
    with contextlib.suppress(OSError):  # only a courtesy for the refusal message
        os.ftruncate(info, 0)
        os.pwrite(info, f"{os.getpid()} {_cmdline(os.getpid())}\n".encode(), 0)
    return WriterLock(fd, info)


def holder_pid(p: Path) -> int | None:
    """The pid of the process holding the writer lock of mirror `p` now, or None: the
    kernel's word (`/proc/locks`), else the holder file's pid if that process is alive. It
    takes no lock and opens no descriptor of the database (closing one would drop this
    process's SQLite locks on it, see the module docstring), so a reader (`ccsync status`)
    never keeps a writer from starting."""
    info_path = holder_file(p)
    if os.path.exists("/proc/locks"):
        for path in (p, info_path):
            with contextlib.suppress(OSError):
                pid = _flock_owner_of(os.stat(path))
                if pid is not None:
                    return pid
        return None
    return _alive(_written_pid(info_path))


def _written_pid(info_path: Path) -> int | None:
    """The pid a holder wrote into the holder file (empty once released), or None."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(info_path.read_text(encoding="utf-8", errors="replace").split()[0])
    return None


def _alive(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, another user's
    return pid


def command_of(pid: int) -> str:
    """Process `pid`'s command line, clipped ('' when it cannot be read)."""
    return _cmdline(pid)


def _holder(info: int, fd: int) -> str:
    """`: pid N (`command line`)` of the process holding the lock, or '' when unknown."""
    pid = _flock_owner(fd) or _flock_owner(info)  # the kernel's word first: the file may be stale
    if pid is None:
        with contextlib.suppress(OSError, ValueError):
            first = os.pread(info, 4096, 0).decode("utf-8", "replace").split(maxsplit=1)
            pid = int(first[0]) if first else None
    if pid is None:
        return ""
    command = _cmdline(pid)
    return f": pid {pid} (`{command}`)" if command else f": pid {pid}"


def _flock_owner(fd: int) -> int | None:
    """The pid `/proc/locks` names for a FLOCK on the inode open on `fd` (Linux), or None."""
    return _flock_owner_of(os.fstat(fd))


def _flock_owner_of(st: os.stat_result) -> int | None:
    """The pid `/proc/locks` names for a FLOCK on the inode of `st` (Linux), or None."""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/locks", encoding="ascii", errors="replace") as f,
    ):
        for line in f:
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters start "->"
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
                pid = int(fields[4])
                if pid > 0:
                    return pid
    return None


def _cmdline(pid: int) -> str:
    """The command line of process `pid` on one line, clipped ('' when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode("utf-8", "replace").split("\0")
    except OSError:
        args = [sys.executable, *sys.argv] if pid == os.getpid() else []
    text = " ".join(" ".join(args).split())
    return text if len(text) <= _CMDLINE_CHARS else text[: _CMDLINE_CHARS - 3] + "..."
