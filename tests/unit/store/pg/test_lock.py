"""`sync.store.pg.lock`: the active/standby advisory lock, against a real PostgreSQL.

Each test takes locks in a fresh database (`pg_db`) of the private server the suite starts: a
second lock waits while the first is held and takes it once released; a holder killed with
SIGKILL (a child process) is replaced within 30 s, measured; a backend the server terminates
makes `held()` False and `fence` refuse; the standby names the holder; the keepalives are set
on both ends; and no error shows the password, whatever the URL's spelling.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sync.core.errors import MirrorError
from sync.store.pg.connect import application_name
from sync.store.pg.lock import (
    ACTIVE,
    CHECK,
    CLIENT_KEEPALIVE,
    CLIENT_USER_TIMEOUT_MS,
    POLL,
    SERVER_KEEPALIVE,
    SERVER_USER_TIMEOUT_MS,
    STANDBY,
    ActiveLock,
    Holder,
    lock_key,
)
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.postgres import ROLE_PASSWORD as PASSWORD

SCHEMA = "ccsync"
#: The takeover the issue asks for after a holder's death.
TAKEOVER_BOUND = 30.0
#: A holder in a child process: takes the lock, says its name, sleeps until killed.
HOLDER_CHILD = """
import sys, time
from sync.store.pg.lock import ActiveLock
lock = ActiveLock(sys.argv[1], sys.argv[2])
assert lock.try_acquire(), "the child could not take the lock"
print(lock.name, lock.backend_pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def locks(pg_db: str) -> Iterator[list[ActiveLock]]:
    """Two locks of one mirror (`SCHEMA` in the test's database), released after the test."""
    made = [ActiveLock(pg_db, SCHEMA), ActiveLock(pg_db, SCHEMA)]
    yield made
    for lock in made:
        lock.release()


def _one_line_without_password(err: MirrorError, *also_hidden: str) -> str:
    text = str(err)
    assert "\n" not in text, text
    assert "[mirror] url" in text, text
    for secret in (PASSWORD, *also_hidden):
        assert secret not in text, text
        assert secret not in repr(err), repr(err)
    return text


def _show(conn: psycopg.Connection[Any], setting: str) -> str:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
    assert row is not None
    return str(row[0])


def test_the_key_is_a_stable_bigint_of_the_schema_name() -> None:
    assert lock_key("ccsync") == lock_key("ccsync") == -4539881370838567763
    assert lock_key("ccsync") != lock_key("ccsync2")
    assert all(-(2**63) <= lock_key(s) < 2**63 for s in ("", "a", "x" * 100))


def test_a_second_lock_waits_while_the_first_holds_and_takes_it_once_released(
    pg_db: str, locks: list[ActiveLock]
) -> None:
    first, second = locks
    assert first.state == second.state == STANDBY
    assert first.try_acquire()
    assert first.try_acquire()  # holding already: still True
    assert not second.try_acquire()
    assert (first.state, second.state) == (ACTIVE, STANDBY)
    assert first.held() and not second.held()
    assert first.backend_pid != second.backend_pid  # two sessions
    with ActiveLock(pg_db, "another_schema") as other:  # another mirror, another key
        assert other.try_acquire()

    first.release()
    assert first.state == STANDBY and not first.held()
    assert second.try_acquire() and second.held()
    assert not first.try_acquire()


def test_the_context_manager_releases_the_lock(pg_db: str, locks: list[ActiveLock]) -> None:
    with ActiveLock(pg_db, SCHEMA) as lock:
        assert lock.try_acquire()
        assert not locks[0].try_acquire()
    assert locks[0].try_acquire()


def test_the_standby_names_the_holder(locks: list[ActiveLock]) -> None:
    active, standby = locks
    assert standby.holder() is None
    assert standby.status() == "standby: the lock is free"
    assert active.try_acquire()

    holder = standby.holder()
    assert holder is not None
    assert holder.pid == active.backend_pid
    assert holder.application == active.name == application_name()
    assert holder.address == "127.0.0.1" and holder.port and holder.port > 0
    assert holder.since is not None
    line = standby.status()
    assert line.startswith(f"standby: active is {active.name} (backend pid {active.backend_pid}")
    assert "from 127.0.0.1:" in line and ", connected 20" in line
    assert active.status() == f"active ({active.name}, backend pid {active.backend_pid})"


def test_a_holder_killed_with_sigkill_is_replaced_within_30_seconds(
    pg_db: str, locks: list[ActiveLock]
) -> None:
    standby = locks[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER_CHILD, pg_db, SCHEMA],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        said = child.stdout.readline().split()
        assert said, child.stderr.read() if child.stderr else "the child said nothing"
        name, backend = said[0], int(said[1])
        assert name.endswith(f":{child.pid}")
        assert not standby.try_acquire()

        seen: list[Holder | None] = []
        os.kill(child.pid, signal.SIGKILL)
        killed = time.monotonic()
        asyncio.run(asyncio.wait_for(standby.wait(on_standby=seen.append), 2 * TAKEOVER_BOUND))
        took = time.monotonic() - killed
    finally:
        child.kill()
        child.wait()
    print(f"takeover {took:.2f} s after SIGKILL (poll {POLL} s)")
    assert took < TAKEOVER_BOUND
    assert standby.state == ACTIVE and standby.held()
    assert all(h is None or (h.pid, h.application) == (backend, name) for h in seen)


def test_held_turns_false_when_the_server_terminates_the_backend(
    admin: psycopg.Connection[Any], locks: list[ActiveLock]
) -> None:
    first, second = locks
    assert first.try_acquire()
    row = admin.execute("SELECT pg_terminate_backend(%s, 5000)", [first.backend_pid]).fetchone()
    assert row == (True,)

    assert not first.held()
    assert first.state == STANDBY and first.backend_pid is None
    assert second.try_acquire()
    assert not first.try_acquire()  # a new connection, and the other holds it now
    assert first.backend_pid is not None


def test_fence_passes_a_write_only_while_the_lock_session_holds(
    pg_db: str, admin: psycopg.Connection[Any], locks: list[ActiveLock]
) -> None:
    lock = locks[0]
    with psycopg.connect(pg_db) as writer:
        assert not lock.fence(writer)
        assert lock.try_acquire()
        with writer.transaction():
            assert lock.fence(writer)
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", [lock.backend_pid])
        with writer.transaction():
            assert not lock.fence(writer)  # before `held()` has noticed


def test_keepalives_are_set_on_the_server_session_and_the_client(
    locks: list[ActiveLock],
) -> None:
    lock = locks[0]
    assert lock.try_acquire()
    conn = lock._connection()
    names = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count")
    shown = tuple(int(_show(conn, n)) for n in names)
    assert shown == SERVER_KEEPALIVE == (10, 5, 3)  # applied to the TCP socket (0 otherwise)
    assert _show(conn, "tcp_user_timeout") == str(SERVER_USER_TIMEOUT_MS)
    assert _show(conn, "idle_session_timeout") == "0"
    client = conninfo_to_dict(conn.info.dsn)
    assert client["keepalives"] == "1"
    given = tuple(int(client[f"keepalives_{k}"]) for k in ("idle", "interval", "count"))
    assert given == CLIENT_KEEPALIVE == (4, 2, 3)
    assert int(client["tcp_user_timeout"]) == CLIENT_USER_TIMEOUT_MS == 10_000


def test_the_arithmetic_of_the_docstring_holds() -> None:
    """A dead host's lock is released within 25 s of its last packet and taken within 30 s;
    a cut-off holder's `held()` fails before the server can release its lock."""
    idle, interval, count = SERVER_KEEPALIVE
    released = SERVER_USER_TIMEOUT_MS / 1000
    assert released == idle + interval * count == 25
    assert released + POLL < TAKEOVER_BOUND
    holder_knows = CHECK + CLIENT_USER_TIMEOUT_MS / 1000
    idle, interval, count = CLIENT_KEEPALIVE
    assert idle + interval * count >= CLIENT_USER_TIMEOUT_MS / 1000  # the user timeout rules
    assert holder_knows < released - CHECK


def test_a_server_that_refuses_is_one_line_without_the_password() -> None:
    port = free_port()
    for dsn in (
        f"postgresql://ccsync:{PASSWORD}@127.0.0.1:{port}/mirror",
        f"host=127.0.0.1 port={port} user=ccsync password={PASSWORD} dbname=mirror",
    ):
        lock = ActiveLock(dsn, SCHEMA)
        with pytest.raises(MirrorError) as caught:
            lock.try_acquire()
        text = _one_line_without_password(caught.value)
        assert text.startswith(f"PostgreSQL mirror ccsync@127.0.0.1:{port}/mirror cannot be used")
        assert "Connection refused" in text and "check the host and port" in text
        assert PASSWORD not in repr(lock)


def test_a_url_that_does_not_parse_is_one_line_without_the_password() -> None:
    with pytest.raises(MirrorError) as caught:
        ActiveLock(f"host=127.0.0.1 password={PASSWORD} junk", SCHEMA).try_acquire()
    text = _one_line_without_password(caught.value)
    assert "[mirror] url is neither a postgresql:// URL nor a libpq connection string" in text


def test_a_missing_database_hides_every_spelling_of_the_password(pg_db: str) -> None:
    host, port = conninfo_to_dict(pg_db)["host"], conninfo_to_dict(pg_db)["port"]
    encoded = "p%40ss%3Aw0rd-secret"  # p@ss:w0rd-secret
    dsn = f"postgresql://postgres:{encoded}@{host}:{port}/no_such_db"
    with pytest.raises(MirrorError) as caught:
        ActiveLock(dsn, SCHEMA).try_acquire()
    text = _one_line_without_password(caught.value, encoded, "p@ss:w0rd-secret")
    assert 'database "no_such_db" does not exist' in text
    assert "create it, or fix the name in [mirror] url" in text


def test_a_role_that_may_not_connect_is_named_with_the_fix(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    db = conninfo_to_dict(pg_db)["dbname"]
    admin.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(db)))
    dsn = make_conninfo(pg_db, user=weak_role, password=PASSWORD)
    with pytest.raises(MirrorError) as caught:
        ActiveLock(dsn, SCHEMA).try_acquire()
    text = _one_line_without_password(caught.value)
    assert f"role {weak_role} may not connect" in text
    assert "User does not have CONNECT privilege" in text and "GRANT it CONNECT" in text


def test_a_role_that_may_not_take_advisory_locks_is_named_with_the_fix(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    admin.execute("REVOKE EXECUTE ON FUNCTION pg_try_advisory_lock(bigint) FROM PUBLIC")
    lock = ActiveLock(make_conninfo(pg_db, user=weak_role, password=PASSWORD), SCHEMA)
    with pytest.raises(MirrorError) as caught:
        lock.try_acquire()
    text = _one_line_without_password(caught.value)
    assert f"role {weak_role} may not take advisory locks" in text
    assert "permission denied for function pg_try_advisory_lock" in text
    assert lock.state == STANDBY and lock.backend_pid is None
