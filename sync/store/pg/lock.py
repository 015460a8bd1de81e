"""One active writer per PostgreSQL mirror, and a standby that takes over when it dies.

Issue #49, item 3: two `ccsync run` on one PostgreSQL mirror (two hosts in production). The
active one holds a **session-level advisory lock** on a connection of its own and writes; the
other polls for the lock (`standby`), shows who holds it, and takes it within 30 s of the
holder's death. The lock lives as long as the holder's server session: a clean exit unlocks
it, a killed process (SIGKILL) closes its socket and the server ends the session at once, and a
dead host (power, network) is reaped by TCP keepalives, below. Not wired into `Mirror`, the
daemon or the configuration yet.

**The key** is a bigint computed here, not on the server: the first 8 bytes of
`sha256("ccsync.active:" + schema)`, signed big-endian (`lock_key`), so any tool, any server
version and any Python agree on it. Advisory locks are per database, so the same schema name in
two databases (or two servers) is two locks. `pg_locks` shows a bigint key as its high half in
`classid`, its low half in `objid` and `objsubid = 1`; that is how the standby finds the holder
(`holder`), joined with `pg_stat_activity` for its `application_name` (set here to
`ccsync@<hostname>:<pid>`) and client address.

**Within 30 s of a dead host.** A host that dies sends nothing: its session stays, and holds
the lock, until the server's TCP gives up on the socket. The lock connection therefore sets,
for its own session (any role may: they are user settings), `tcp_keepalives_idle = 10`,
`tcp_keepalives_interval = 5`, `tcp_keepalives_count = 3` and `tcp_user_timeout = 25000` ms
(PostgreSQL 12+). With L the last packet the server received from the holder: probes at L+10,
L+15, L+20, and at L+25 the socket is dropped (Linux ends it once `tcp_user_timeout` has passed
with a probe unanswered, or after the third; a reply the server sent and never saw
acknowledged is dropped by the same timeout). The backend's read fails, it exits, and its
locks go with it: released by L+25 <= death+25. A standby asking every `POLL` = 2 s has it by
death+27 s. (Measured with the holder in a network namespace whose link was cut: taken over
24 s after the cut.)

**The holder gives up first.** The client's side is shorter, through libpq: `keepalives=1`,
`keepalives_idle=4`, `keepalives_interval=2`, `keepalives_count=3`, `tcp_user_timeout=10000`:
a round trip on a cut connection fails within 10 s, and a quiet one is found dead as soon.
The active daemon asks `held()` every `CHECK` = 2 s, so the server has heard from it at most
2 s before a cut (L >= cut-2: the lock is released no sooner than cut+23), while its own next
`held()`, at most 2 s after the cut, fails by cut+12: the cut-off holder stops 11 s before the
standby can start. (Over a Unix socket none of this applies, nor is needed: a dead process's
socket is closed by its kernel, and the host is the server's.)

**Never both writing.** `held()` is a round trip on the lock connection asking `pg_locks`
whether our backend holds the key; any error (the server terminated us, the network dropped
the socket) is `False` and closes the connection: the daemon must stop writing at once. The
data are written on another connection, whose transactions can end with `fence(conn)`: the
same question asked there, so a page commits only while our lock session still holds the lock
(what is left is the time between that query and the COMMIT: one round trip, against the
standby's poll).

**Errors** are `MirrorError`s of one line naming `[mirror] url` and the fix: a URL that does
not parse or connect, a role that may not connect or take the lock, a server too old or
read-only; made, with the password masked, by `sync.store.pg.connect`, shared with the data
connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Final

import psycopg

from sync.core.errors import MirrorError
from sync.store.pg.connect import (
    CONNECT_TIMEOUT,
    application_name,
    check_server,
    conninfo,
    refused,
    server_version,
    target,
    unreachable,
)

#: What `state` says: holding the lock and writing, or waiting for it.
ACTIVE: Final = "active"
STANDBY: Final = "standby"

#: Seconds between a standby's attempts (the takeover arithmetic above counts on 2).
POLL = 2.0
#: Seconds between the active daemon's `held()` (the arithmetic above counts on at most 2).
CHECK = 2.0
#: The server side, set by the lock's session: TCP keepalive (seconds) and user timeout (ms):
#: idle + interval * count, so a socket with data in flight ends when an idle one would.
SERVER_KEEPALIVE: Final = (10, 5, 3)
SERVER_USER_TIMEOUT_MS = 25_000
#: The client side, through libpq: shorter, so a cut-off holder knows before the server lets
#: its lock go.
CLIENT_KEEPALIVE: Final = (4, 2, 3)
CLIENT_USER_TIMEOUT_MS = 10_000

#: Settings the lock session sets for itself: (first server version having it, name, value).
#: `idle_session_timeout` off: a quiet holder is not a dead one.
SESSION_SETTINGS: Final = (
    (0, "tcp_keepalives_idle", str(SERVER_KEEPALIVE[0])),
    (0, "tcp_keepalives_interval", str(SERVER_KEEPALIVE[1])),
    (0, "tcp_keepalives_count", str(SERVER_KEEPALIVE[2])),
    (120000, "tcp_user_timeout", str(SERVER_USER_TIMEOUT_MS)),
    (140000, "idle_session_timeout", "0"),
)

#: The granted advisory lock on the key, in this database.
_LOCK_ROW = """
    l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.classid = %(hi)s::bigint::oid AND l.objid = %(lo)s::bigint::oid
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
#: The same for the standbys' key, any mode (each standby holds it shared).
_STANDBY_ROW = _LOCK_ROW.replace("%(hi)s", "%(shi)s").replace("%(lo)s", "%(slo)s")
_STANDBYS = f"""
    SELECT l.pid, a.application_name, host(a.client_addr), a.client_port, a.backend_start
    FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE {_STANDBY_ROW} ORDER BY a.backend_start
"""
_HELD = f"SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE {_LOCK_ROW} AND l.pid = %(pid)s)"
#: The rights the lock needs, said when one is missing.
_GRANT = "GRANT it CONNECT on the database and EXECUTE on pg_try_advisory_lock(bigint)"
_HOLDER = f"""
    SELECT l.pid, a.application_name, host(a.client_addr), a.client_port, a.backend_start
    FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE {_LOCK_ROW}
"""


def lock_key(schema: str) -> int:
    """The advisory lock's bigint key for the mirror in `schema` (see the module docstring)."""
    digest = hashlib.sha256(f"ccsync.active:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def standby_key(schema: str) -> int:
    """The key every standby of `schema`'s mirror holds shared while it waits (`standbys`)."""
    return lock_key(f"standby:{schema}")


def _halves(key: int) -> tuple[int, int]:
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF


@dataclass(frozen=True)
class Holder:
    """The session holding the lock, as `pg_locks` and `pg_stat_activity` show it. Fields other
    than `pid` are None when hidden: another role's session, seen by a role without
    `pg_read_all_stats`, shows no address."""

    pid: int
    application: str | None
    address: str | None
    port: int | None
    since: datetime | None

    @property
    def process(self) -> int | None:
        """The holder's pid on its own host, from its application name (`ccsync@h1:123`: 123;
        None for a session not named by `application_name`)."""
        found = re.fullmatch(r"ccsync@[^:]*:(\d+)", self.application or "")
        return int(found.group(1)) if found else None

    def describe(self) -> str:
        """`ccsync@h1:123 (backend pid 456 from 10.0.0.5:51234, connected ...)`: a status line."""
        where = f" from {self.address}" if self.address else ""
        where += f":{self.port}" if self.address and self.port and self.port > 0 else ""
        since = f", connected {self.since.isoformat(timespec='seconds')}" if self.since else ""
        detail = f"backend pid {self.pid}{where}{since}"
        return f"{self.application} ({detail})" if self.application else detail


class ActiveLock:
    """The active/standby lock of the mirror in `schema` of the database `dsn` names.

    `try_acquire` takes it if free; `wait` polls until it does; `held` asks whether it is still
    ours; `release` gives it up (and `with ActiveLock(...) as lock:` releases on the way out).
    One dedicated connection, in autocommit, made on first use and made again after one is
    lost. Not safe for use from several threads at once.
    """

    def __init__(self, dsn: str, schema: str, *, name: str | None = None) -> None:
        self.schema = schema
        self.key = lock_key(schema)
        self.name = name or application_name()
        self._dsn = dsn
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._pid: int | None = None
        self._active = False
        self._standing = False  # our session holds the standby key (`stand_by`)
        hi, lo = _halves(self.key)
        shi, slo = _halves(standby_key(schema))
        self._halves = {"hi": hi, "lo": lo}
        self._standby_halves = {"shi": shi, "slo": slo}

    def __repr__(self) -> str:  # never the DSN: it may hold the password
        return f"ActiveLock({target(self._dsn)!r}, {self.schema!r}, {self.state})"

    @property
    def state(self) -> str:
        """`active` while this process believes it holds the lock, else `standby`."""
        return ACTIVE if self._active else STANDBY

    @property
    def backend_pid(self) -> int | None:
        """The server pid of the lock's session, None without a connection."""
        return self._pid

    def try_acquire(self) -> bool:
        """Take the lock if it is free: True when held (already, or now). A connection lost
        since the last call is made again first; MirrorError when none can be made."""
        if self._active and self.held():
            return True
        for attempt in (1, 2):
            conn = self._connection()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", [self.key]).fetchone()
            except psycopg.errors.InsufficientPrivilege as exc:
                self._close()
                raise self._refused("may not take advisory locks", exc) from None
            except psycopg.Error as exc:
                self._close()  # the server went away since the connection was made
                if attempt == 2:
                    raise self._unreachable(exc) from None
                continue
            self._active = bool(row and row[0])
            if self._active and self._standing:
                self._standing = False
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock_shared(%s)", [standby_key(self.schema)])
            return self._active
        raise AssertionError("unreachable")  # pragma: no cover

    def stand_by(self) -> None:
        """Show this session as a standby until it takes the lock (`standbys` lists it): a
        shared advisory lock on `standby_key`, the session's, so a standby that dies leaves
        the list with its connection. Taken once per connection; MirrorError as `holder`'s."""
        if self._active or self._standing:
            return
        conn = self._connection()
        try:
            conn.execute("SELECT pg_advisory_lock_shared(%s)", [standby_key(self.schema)])
        except psycopg.Error as exc:
            self._close()
            raise self._unreachable(exc) from None
        self._standing = True

    def standbys(self) -> list[Holder]:
        """The sessions waiting as standbys of this mirror (`stand_by`), oldest first;
        MirrorError as `holder`'s."""
        conn = self._connection()
        try:
            rows = conn.execute(_STANDBYS, self._standby_halves).fetchall()
        except psycopg.Error as exc:
            self._close()
            raise self._unreachable(exc) from None
        return [
            Holder(int(p), app or None, addr, port, since) for p, app, addr, port, since in rows
        ]

    def held(self) -> bool:
        """Whether the lock is ours now: a round trip asking `pg_locks` for it under our
        backend pid. Any error, a connection the server ended among them, is False, closes the
        connection and makes the state `standby`: stop writing at once. Ask every `CHECK`
        seconds; on a cut network it returns False within `CLIENT_USER_TIMEOUT_MS`."""
        if not self._active or self._conn is None:
            self._active = False
            return False
        try:
            row = self._conn.execute(_HELD, {**self._halves, "pid": self._pid}).fetchone()
        except psycopg.Error:
            self._close()
            return False
        self._active = bool(row and row[0])
        if not self._active:
            self._close()
        return self._active

    def fence(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether our lock session still holds the lock, asked on `conn`, the caller's write
        connection, inside its transaction: the last statement before a page's COMMIT, so no
        page commits after the lock is gone (see the module docstring). Errors are the
        caller's (its transaction has failed anyway)."""
        if not self._active or self._pid is None:
            return False
        row = conn.execute(_HELD, {**self._halves, "pid": self._pid}).fetchone()
        return bool(row and row[0])

    def holder(self) -> Holder | None:
        """The session holding the lock now (ours included), None when it is free. Errors are
        MirrorErrors, as `try_acquire`'s."""
        conn = self._connection()
        try:
            row = conn.execute(_HOLDER, self._halves).fetchone()
        except psycopg.Error as exc:
            self._close()
            raise self._unreachable(exc) from None
        if row is None:
            return None
        pid, app, address, port, since = row
        return Holder(int(pid), app or None, address, port, since)

    def status(self) -> str:
        """One line for a status or health report: `active (...)` naming this session, or
        `standby: active is ...` naming the holder (without a round trip when active)."""
        if self._active:
            return f"{ACTIVE} ({self.name}, backend pid {self._pid})"
        try:
            holder = self.holder()
        except MirrorError as exc:
            return f"{STANDBY}: {exc}"
        if holder is None:
            return f"{STANDBY}: the lock is free"
        return f"{STANDBY}: active is {holder.describe()}"

    async def wait(
        self, poll: float = POLL, on_standby: Callable[[Holder | None], object] | None = None
    ) -> None:
        """Return once the lock is ours, trying every `poll` seconds; between tries
        `on_standby(holder)` is told who holds it (None: nobody now, the next try takes it).
        Each try is one short round trip, run on the event loop as the mirror's own queries
        are; MirrorError when the server cannot be reached (the caller retries, as it retries
        the upstream)."""
        while not self.try_acquire():
            if on_standby is not None:
                on_standby(self.holder())
            await asyncio.sleep(poll)

    def release(self) -> None:
        """Unlock and close the connection (closing alone would do: the lock is the
        session's). Safe to call when nothing is held or the connection is gone."""
        conn, self._active = self._conn, False
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock(%s)", [self.key])
        self._close()

    def __enter__(self) -> ActiveLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The lock's connection, made (and set up) when there is none or it was lost."""
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._close()
        info = conninfo(
            self._dsn,
            application_name=self.name,
            connect_timeout=str(CONNECT_TIMEOUT),
            keepalives="1",
            keepalives_idle=str(CLIENT_KEEPALIVE[0]),
            keepalives_interval=str(CLIENT_KEEPALIVE[1]),
            keepalives_count=str(CLIENT_KEEPALIVE[2]),
            tcp_user_timeout=str(CLIENT_USER_TIMEOUT_MS),
        )
        try:
            conn = psycopg.connect(info, autocommit=True)
        except psycopg.Error as exc:
            raise self._unreachable(exc) from None
        try:
            self._set_up(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _set_up(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Refuse a server too old or read-only (a lock taken on a replica would not keep
        anyone off the primary), set the session's keepalives and learn its backend pid."""
        try:
            check_server(conn, self._dsn, writer=True)
            version = server_version(conn)
            settings = [(n, v) for since, n, v in SESSION_SETTINGS if version >= since]
            calls = ", ".join("set_config(%s, %s, false)" for _ in settings)
            args = [x for pair in settings for x in pair]
            row = conn.execute(f"SELECT pg_backend_pid(), {calls}", args).fetchone()
        except psycopg.Error as exc:
            raise self._unreachable(exc) from None
        assert row is not None
        self._pid = int(row[0])

    def _close(self) -> None:
        conn, self._conn, self._pid, self._active = self._conn, None, None, False
        self._standing = False
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _unreachable(self, exc: psycopg.Error) -> MirrorError:
        return unreachable(self._dsn, exc, _GRANT)

    def _refused(self, what: str, exc: psycopg.Error) -> MirrorError:
        return refused(self._dsn, what, exc, _GRANT)


def holder_of(dsn: str, schema: str) -> Holder | None:
    """Who holds the active lock of the mirror in `schema` now (None: nobody), asked on a
    connection of its own, closed after: what `ccsync status` knows of a PostgreSQL mirror's
    writer, as `sync.store.lock.holder_pid` of an SQLite file's. MirrorError when it cannot be
    asked (a replica: the primary's locks are not there)."""
    with ActiveLock(dsn, schema) as lock:
        return lock.holder()
