"""A private PostgreSQL server for the tests, started from the machine's own binaries.

The PostgreSQL mirror (issue #49) is tested against a real server, never a fake and never
skipped. With `SYNC_TEST_PG_DSN` set, the tests use that server (its role needs CREATEDB: each
test gets a database of its own). Without it, `start` makes one: `initdb` into a fresh
temporary directory (trust authentication, locale C, UTF8), `pg_ctl start` on a free port of
127.0.0.1 with its Unix socket in that directory (so two servers, one per xdist worker, share
nothing but the host), `fsync` off (the data is thrown away), and stops it with
`pg_ctl stop -m immediate` at the end. The binaries are `initdb`/`pg_ctl` on PATH, else the
newest `/usr/lib/postgresql/<version>/bin` (Debian's layout); missing ones fail with one line
saying what to install, and so does a server that will not start (with the last line of its
log).

**Root.** PostgreSQL refuses to run as root (`initdb` and `postgres` check the effective uid),
and CI runs as root. Then the temporary directory is given to the unprivileged user `postgres`
(the Debian package creates it) and `initdb` and `pg_ctl` run as that user through
`subprocess`'s own `user=`/`group=`/`extra_groups=[]`: the child drops its supplementary groups,
gid and uid before it executes the binary: no helper program to find (`runuser` and `setpriv`
are util-linux's, and `runuser` opens a PAM session) and no shell quoting. The server `pg_ctl` forks inherits that uid. The
directory must be traversable by `postgres`: a `TMPDIR` under a root-only directory is not, and
`/tmp` is used instead.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sync.core.target import is_url
from tests.support.ports import free_port

#: A DSN of a server to use instead of starting one (its role needs CREATEDB).
ENV_DSN = "SYNC_TEST_PG_DSN"
#: The unprivileged user the server runs as when the tests run as root.
SERVER_USER = "postgres"
#: The superuser `initdb` creates (trust authentication: no password).
SUPERUSER = "postgres"
#: The password of the roles tests make (the server trusts every local connection: it is never
#: checked, only looked for in messages, where it must never appear).
ROLE_PASSWORD = "Pa55-w0rd-never-shown"
INSTALL = "install the Debian package `postgresql` (apt-get install postgresql)"
#: Where Debian installs each major version's server binaries.
DEBIAN_BINDIRS = Path("/usr/lib/postgresql")
#: Attempts at a free port: another process (the other xdist worker) may take one between
#: `free_port` and the server's bind.
PORT_TRIES = 5
START_TIMEOUT = 30.0
#: The server's settings for the tests: no durability (the data is thrown away) and little
#: memory (one server per xdist worker). `start(settings=...)` overrides any of them
#: (`bench/pg_write.py` asks for the durability and memory of a server in use).
SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "50",
    "shared_buffers": "32MB",
}


class PostgresUnavailable(RuntimeError):
    """No private server: binaries missing, or one that would not start. Its message is one
    line, what a test that needs the server fails with."""


@dataclass(frozen=True)
class Binaries:
    initdb: Path
    pg_ctl: Path


def find_binaries() -> Binaries:
    """`initdb` and `pg_ctl` on PATH, else those of the newest `/usr/lib/postgresql/*/bin`."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Binaries(Path(initdb), Path(pg_ctl))
    versions = sorted(
        (int(m.group(1)), d / "bin")
        for d in (DEBIAN_BINDIRS.iterdir() if DEBIAN_BINDIRS.is_dir() else ())
        if (m := re.fullmatch(r"(\d+)(?:\.\d+)?", d.name))
        and (d / "bin" / "initdb").exists()
        and (d / "bin" / "pg_ctl").exists()
    )
    if not versions:
        raise PostgresUnavailable(
            f"PostgreSQL's initdb and pg_ctl are neither on PATH nor in "
            f"{DEBIAN_BINDIRS}/<version>/bin: {INSTALL}, or set {ENV_DSN} to a server's DSN"
        )
    bindir = versions[-1][1]
    return Binaries(bindir / "initdb", bindir / "pg_ctl")


@dataclass(frozen=True)
class RunAs:
    """Who runs the server: this process's user, or `postgres` when this process is root."""

    uid: int | None = None
    gid: int | None = None

    @classmethod
    def for_this_process(cls) -> RunAs:
        if os.geteuid() != 0:
            return cls()
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root, and PostgreSQL refuses root: no user {SERVER_USER!r} to run "
                f"it as ({INSTALL} creates one)"
            ) from None
        return cls(entry.pw_uid, entry.pw_gid)

    def kwargs(self) -> dict[str, Any]:
        """`subprocess.run` arguments that run a child as this user (none: as ourselves)."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def can_traverse(self, path: Path) -> bool:
        """Whether this user may enter `path` and every directory above it (mode bits only:
        enough for the plain directories a temporary directory lives under)."""
        if self.uid is None:
            return True
        for d in (path, *path.parents):
            st = d.stat()
            if st.st_uid == self.uid:
                ok = bool(st.st_mode & 0o100)
            elif st.st_gid == self.gid:
                ok = bool(st.st_mode & 0o010)
            else:
                ok = bool(st.st_mode & 0o001)
            if not ok:
                return False
        return True


@dataclass
class Server:
    """A running private server: its directory, port, and how long it took to start."""

    root: Path
    port: int
    binaries: Binaries
    run_as: RunAs
    started_in: float = 0.0
    stopped: bool = field(default=False, init=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def dsn(self) -> str:
        return make_conninfo(
            host="127.0.0.1", port=str(self.port), user=SUPERUSER, dbname="postgres"
        )

    def stop(self) -> None:
        """`pg_ctl stop -m immediate` (the data is thrown away: no checkpoint to wait for),
        then the directory removed."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.run(
                str(self.binaries.pg_ctl), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """One of the server's programs, as the user who runs the server, in its directory."""
        return subprocess.run(
            args,
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            timeout=START_TIMEOUT + 30,
            **self.run_as.kwargs(),
        )


def _last_line(text: str) -> str:
    """The line of a server's output that says why it stopped: its last FATAL (else ERROR,
    else last) line without the time and pid, with the LOG line before it that says why (a
    port it could not bind)."""
    lines = [_LEVEL.sub(r"\1: ", ln.strip()) for ln in text.splitlines() if ln.strip()]
    worst = [i for i, ln in enumerate(lines) if ln.startswith(("FATAL", "PANIC", "ERROR"))]
    if not worst:
        return lines[-1] if lines else "(no output)"
    at = worst[-1]
    cause = next(
        (ln for ln in reversed(lines[:at]) if ln.startswith("LOG") and "could not" in ln), ""
    )
    return f"{lines[at]} ({cause})" if cause else lines[at]


#: A log line's prefix up to its level (`2026-01-01 00:00:00.000 UTC [123] FATAL:  ...`).
_LEVEL = re.compile(r"^.*?\b(LOG|FATAL|PANIC|ERROR|WARNING|DETAIL|HINT):\s+")


def _temp_root(run_as: RunAs) -> Path:
    """A new directory for the server, owned by the user who runs it."""
    base = Path(tempfile.gettempdir())
    if not run_as.can_traverse(base):
        base = Path("/tmp")
    if not run_as.can_traverse(base):
        raise PostgresUnavailable(
            f"user {SERVER_USER!r} cannot traverse {base}: point TMPDIR at a directory it can"
        )
    root = Path(tempfile.mkdtemp(prefix="ccsync-pg-", dir=base))
    if run_as.uid is not None and run_as.gid is not None:
        os.chown(root, run_as.uid, run_as.gid)
    return root


def start(settings: Mapping[str, str] | None = None) -> Server:
    """Initialise and start a private server (see the module's docstring), with `SETTINGS`
    and `settings` over them; raises `PostgresUnavailable` with one line when it cannot."""
    began = time.monotonic()
    binaries = find_binaries()
    run_as = RunAs.for_this_process()
    root = _temp_root(run_as)
    server = Server(root, 0, binaries, run_as)
    try:
        init = server.run(
            str(binaries.initdb),
            "-D",
            str(server.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--locale=C",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        )
        if init.returncode != 0:
            raise PostgresUnavailable(
                f"{binaries.initdb} failed (exit {init.returncode}): "
                f"{_last_line(init.stderr + init.stdout)}"
            )
        for _ in range(PORT_TRIES):
            server.port = free_port()
            if _start_on_port(server, {**SETTINGS, **(settings or {})}):
                break
        else:
            raise PostgresUnavailable(
                f"PostgreSQL found no free port in {PORT_TRIES} tries: "
                f"{_last_line(server.log.read_text())}"
            )
        _wait_for_connections(server)
    except BaseException:
        server.stop()
        raise
    server.started_in = time.monotonic() - began
    return server


def _start_on_port(server: Server, settings: Mapping[str, str]) -> bool:
    """Start the server on `server.port` with `settings` and wait until it is ready: True;
    False when the port was taken meanwhile (try another); `PostgresUnavailable` for any other
    failure."""
    where = {
        "listen_addresses": "127.0.0.1",
        "port": str(server.port),
        "unix_socket_directories": str(server.root),
    }
    options = " ".join(f"-c {k}={v}" for k, v in {**settings, **where}.items())
    server.log.unlink(missing_ok=True)
    started = server.run(
        str(server.binaries.pg_ctl),
        "-D",
        str(server.data),
        "-l",
        str(server.log),
        "-o",
        options,
        "-w",
        "-t",
        str(int(START_TIMEOUT)),
        "start",
    )
    if started.returncode == 0:
        return True
    log = server.log.read_text() if server.log.exists() else ""
    if "Address already in use" in log:
        return False
    raise PostgresUnavailable(
        f"PostgreSQL did not start ({server.binaries.pg_ctl} exit {started.returncode}): "
        f"{_last_line(log or started.stderr + started.stdout)}"
    )


def _wait_for_connections(server: Server) -> None:
    """Until a client connects over TCP (pg_ctl's `-w` asked over the socket)."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with psycopg.connect(server.dsn, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise PostgresUnavailable(
                    f"PostgreSQL on 127.0.0.1:{server.port} accepts no connection: "
                    f"{str(exc).strip().splitlines()[-1]}"
                ) from None
            time.sleep(0.05)


@contextlib.contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """A new, empty database on the server of `dsn` (`t_<uuid>`), its DSN; dropped after."""
    name = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield as_url(make_conninfo(dsn, dbname=name))
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def as_url(dsn: str) -> str:
    """`dsn` (a URL or `key=value` words) as the `postgresql://` URL `[mirror] url` takes."""
    if is_url(dsn):
        return dsn
    parts = conninfo_to_dict(dsn)
    user = quote(str(parts.get("user", "")), safe="")
    password = parts.get("password")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    host, port = parts.get("host", "localhost"), parts.get("port", "5432")
    return f"postgresql://{auth}{host}:{port}/{quote(str(parts.get('dbname', '')), safe='')}"
