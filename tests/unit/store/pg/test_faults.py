"""sync.store.pg.faults: the storage watch's write check on a PostgreSQL mirror, and the faults
`sync.store.faults` names from the server's errors, against a real server (`pg_db`).

The check commits and leaves nothing; a connection the server ended is `unreachable` once and
made again by the next check; another session's lock past `busy_ms` is `locked`; a read-only
session is `read_only`; the fault names the target, never the password.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sync.core.errors import StorageFault
from sync.core.target import MirrorTarget
from sync.store.faults import (
    LOCKED,
    READ_ONLY,
    UNREACHABLE,
    classify,
    database_errors,
    storage_errors,
    storage_fault,
)
from sync.store.pg.bookkeeping import ensure_bookkeeping
from sync.store.pg.faults import CHECK_KEY, LiveConnection, PgStorageCheck
from tests.support.ports import free_port

SCHEMA = "mirror_f"
PASSWORD = "Pa55-w0rd-never-shown"


@pytest.fixture
def live(pg_db: str) -> Iterator[LiveConnection]:
    live = LiveConnection(lambda: psycopg.connect(pg_db, autocommit=True))
    ensure_bookkeeping(live(), SCHEMA)
    yield live
    live.close()


def _rows(conn: psycopg.Connection[Any]) -> int:
    query = sql.SQL("SELECT count(*) FROM {} WHERE key = %s").format(
        sql.Identifier(SCHEMA, "_sync_meta")
    )
    row = conn.execute(query, [CHECK_KEY]).fetchone()
    return int(row[0]) if row else -1


def test_the_check_commits_and_leaves_no_row(live: LiveConnection) -> None:
    PgStorageCheck(live, SCHEMA).check_writes()
    PgStorageCheck(live, SCHEMA).check_writes(busy_ms=200, room=True)
    assert _rows(live()) == 0
    assert live().info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_connection_the_server_ended_is_unreachable_then_made_again(
    live: LiveConnection, pg_db: str
) -> None:
    check = PgStorageCheck(live, SCHEMA)
    first = live()
    with psycopg.connect(pg_db, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first.info.backend_pid])
    with pytest.raises(psycopg.Error) as lost:
        check.check_writes()
    assert classify(lost.value) == UNREACHABLE
    assert isinstance(lost.value, storage_errors()) and isinstance(lost.value, database_errors())
    check.check_writes()  # a new connection: the server is there
    assert live() is not first and _rows(live()) == 0


def test_another_sessions_lock_past_busy_ms_is_locked(live: LiveConnection, pg_db: str) -> None:
    table = sql.Identifier(SCHEMA, "_sync_meta")
    with psycopg.connect(pg_db) as other:  # a transaction left open, holding the table
        other.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
        with pytest.raises(psycopg.Error) as held:
            PgStorageCheck(live, SCHEMA).check_writes(busy_ms=100)
        assert classify(held.value) == LOCKED
        other.rollback()
    PgStorageCheck(live, SCHEMA).check_writes(busy_ms=100)


def test_a_read_only_session_is_read_only(live: LiveConnection) -> None:
    live().execute("SET default_transaction_read_only = on")
    with pytest.raises(psycopg.Error) as refused:
        PgStorageCheck(live, SCHEMA).check_writes()
    fault = storage_fault(refused.value, "the mirror", then="retrying")
    assert fault is not None and fault.reason == READ_ONLY
    assert "[mirror] url" in fault.fix


def test_a_fault_names_the_server_and_never_the_password() -> None:
    url = f"postgresql://writer:{PASSWORD}@127.0.0.1:{free_port()}/db"
    with pytest.raises(psycopg.OperationalError) as gone:
        psycopg.connect(url, connect_timeout=5)
    where = MirrorTarget(url=url, schema=SCHEMA).describe()
    fault = storage_fault(gone.value, where, then="and the daemon resumes by itself")
    assert isinstance(fault, StorageFault) and fault.reason == UNREACHABLE
    assert PASSWORD not in str(fault) and "127.0.0.1" in str(fault)
    assert "\n" not in str(fault)


def test_an_error_that_is_no_storage_fault_is_left_alone(live: LiveConnection) -> None:
    with pytest.raises(psycopg.Error) as bug:
        live().execute("SELECT no_such_column FROM pg_class")
    assert classify(bug.value) is None
    assert storage_fault(bug.value, "the mirror", then="retrying") is None
