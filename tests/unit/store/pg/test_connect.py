"""`sync.store.pg.connect`: a checked connection to the mirror's schema, against a real server.

A writer creates its schema and gets an autocommit connection named for this process; a reader
gets a read-only session. Each refusal is one line naming the setting and the fix, never the
password: a URL that does not parse or connect, a server too old (the version read is
monkeypatched: the suite has one server), a read-only server for a writer, a role without the
rights a writer or a reader needs (roles made by the superuser of `pg_db`), a schema another
program owns, and a reader given a schema without a mirror.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import sync.store.pg.connect as connect_module
from sync.core.errors import MirrorError
from sync.store.pg.bookkeeping import Meta, ensure_bookkeeping
from sync.store.pg.connect import (
    MIN_SERVER,
    application_name,
    connect,
    masked,
    passwords,
    reason,
    target,
)
from tests.support.ports import free_port
from tests.support.postgres import ROLE_PASSWORD

SCHEMA = "mirror_x"


def _as(pg_db: str, role: str) -> str:
    return make_conninfo(pg_db, user=role, password=ROLE_PASSWORD)


def _refusal(url: str, schema: str = SCHEMA, *, readonly: bool) -> str:
    """The one line `connect` refuses with, checked for the password."""
    with pytest.raises(MirrorError) as caught:
        connect(url, schema, readonly=readonly).close()
    text = str(caught.value)
    assert "\n" not in text, text
    assert ROLE_PASSWORD not in text and ROLE_PASSWORD not in repr(caught.value), text
    return text


def _grant(admin: psycopg.Connection[Any], template: str, *names: str) -> None:
    admin.execute(sql.SQL(template).format(*(sql.Identifier(n) for n in names)))


def _mirror(admin: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """A mirror's marker table in `schema`, made by the superuser."""
    ensure_bookkeeping(admin, schema)


def test_a_writer_creates_its_schema_and_gets_an_autocommit_named_connection(
    pg_db: str, admin: psycopg.Connection[Any]
) -> None:
    with connect(pg_db, SCHEMA, readonly=False) as conn:
        assert conn.autocommit
        row = conn.execute("SELECT current_setting('application_name')").fetchone()
        assert row is not None and row[0] == application_name()
        ensure_bookkeeping(conn, SCHEMA)
        with conn.transaction():
            Meta(conn, SCHEMA).set("k", "v")
    found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [SCHEMA]).fetchone()
    assert found is not None


def test_a_reader_sees_the_mirror_in_a_read_only_session(
    pg_db: str, admin: psycopg.Connection[Any]
) -> None:
    _mirror(admin)
    Meta(admin, SCHEMA).set("k", "v")
    with connect(pg_db, SCHEMA, readonly=True) as conn:
        assert Meta(conn, SCHEMA).get("k") == "v"
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            Meta(conn, SCHEMA).set("k", "w")


def test_a_reader_given_a_schema_without_a_mirror_is_told_to_backfill(pg_db: str) -> None:
    text = _refusal(pg_db, readonly=True)
    assert text.startswith(f"no mirror in schema {SCHEMA} of PostgreSQL mirror ")
    assert "run ccsync backfill first, or check [mirror] schema" in text


def test_a_schema_another_program_owns_is_refused_to_writer_and_reader(
    pg_db: str, admin: psycopg.Connection[Any]
) -> None:
    _grant(admin, "CREATE SCHEMA {}", SCHEMA)
    admin.execute(sql.SQL("CREATE TABLE {} (x int)").format(sql.Identifier(SCHEMA, "orders")))
    for readonly in (False, True):
        text = _refusal(pg_db, readonly=readonly)
        assert f"schema {SCHEMA} of PostgreSQL mirror" in text
        assert "holds tables of another program (it has no _sync_meta)" in text
        assert "choose another [mirror] schema" in text
    tables = admin.execute(
        "SELECT count(*) FROM pg_tables WHERE schemaname = %s", [SCHEMA]
    ).fetchone()
    assert tables == (1,)  # nothing was written among them


def test_a_writer_that_may_not_create_the_schema_is_named_with_the_fix(
    pg_db: str, weak_role: str
) -> None:
    text = _refusal(_as(pg_db, weak_role), readonly=False)
    assert text.startswith(f"role {weak_role} may not create schema {SCHEMA} of PostgreSQL")
    assert "GRANT CREATE ON DATABASE" in text
    assert f"CREATE SCHEMA {SCHEMA} AUTHORIZATION {weak_role}" in text


def test_a_writer_needs_usage_and_create_on_an_existing_schema_not_on_the_database(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    _grant(admin, "CREATE SCHEMA {}", SCHEMA)
    url = _as(pg_db, weak_role)
    text = _refusal(url, readonly=False)
    assert f"role {weak_role} may not create tables in schema {SCHEMA}" in text
    assert f"GRANT USAGE, CREATE ON SCHEMA {SCHEMA} TO {weak_role}" in text
    _grant(admin, "GRANT USAGE, CREATE ON SCHEMA {} TO {}", SCHEMA, weak_role)
    with connect(url, SCHEMA, readonly=False) as conn:
        ensure_bookkeeping(conn, SCHEMA)  # no CREATE on the database asked
        Meta(conn, SCHEMA).set("k", "v")


def test_a_writer_that_does_not_own_the_mirrors_tables_is_refused(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    _mirror(admin)
    _grant(admin, "GRANT USAGE, CREATE ON SCHEMA {} TO {}", SCHEMA, weak_role)
    text = _refusal(_as(pg_db, weak_role), readonly=False)
    assert f"role {weak_role} does not own table _sync_cursors in schema {SCHEMA}" in text
    assert f"OWNER TO {weak_role}" in text


def test_a_reader_needs_usage_on_the_schema_and_select_on_its_tables(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    _mirror(admin)
    url = _as(pg_db, weak_role)
    text = _refusal(url, readonly=True)
    assert f"role {weak_role} may not use schema {SCHEMA}" in text
    assert f"GRANT USAGE ON SCHEMA {SCHEMA} TO {weak_role}" in text
    _grant(admin, "GRANT USAGE ON SCHEMA {} TO {}", SCHEMA, weak_role)
    text = _refusal(url, readonly=True)
    assert f"role {weak_role} may not read table _sync_cursors in schema {SCHEMA}" in text
    assert f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {weak_role}" in text
    _grant(admin, "GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}", SCHEMA, weak_role)
    connect(url, SCHEMA, readonly=True).close()


def test_a_server_older_than_the_minimum_is_refused(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect_module, "server_version", lambda conn: 110022)
    text = _refusal(pg_db, readonly=True)
    assert "runs PostgreSQL 11, older than the 12 the mirror needs" in text
    assert "upgrade the server, or point [mirror] url at one of 12 or later" in text
    monkeypatch.setattr(connect_module, "server_version", lambda conn: MIN_SERVER)
    _refusal(pg_db, readonly=True)  # old enough: on to the next check (no mirror)
    connect(pg_db, SCHEMA, readonly=False).close()


def test_a_read_only_server_is_refused_to_a_writer_but_serves_a_reader(
    pg_db: str, admin: psycopg.Connection[Any]
) -> None:
    _mirror(admin)
    db = conninfo_to_dict(pg_db)["dbname"]
    _grant(admin, "ALTER DATABASE {} SET default_transaction_read_only = on", str(db))
    text = _refusal(pg_db, readonly=False)
    assert "is read-only (default_transaction_read_only is on)" in text
    assert "point [mirror] url at a server that takes writes" in text
    connect(pg_db, SCHEMA, readonly=True).close()


def test_a_replica_in_recovery_is_refused_to_a_writer(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite has no replica: the server's answer to `pg_is_in_recovery()` is stood in for.
    monkeypatch.setattr(connect_module, "_WRITABLE", "SELECT true, 'off'")
    text = _refusal(pg_db, readonly=False)
    assert "is a read-only replica (in recovery)" in text
    assert "point [mirror] url at the primary server" in text


def test_a_server_that_refuses_is_one_line_without_the_password() -> None:
    port = free_port()
    for url in (
        f"postgresql://ccsync:{ROLE_PASSWORD}@127.0.0.1:{port}/mirror",
        f"host=127.0.0.1 port={port} user=ccsync password={ROLE_PASSWORD} dbname=mirror",
    ):
        text = _refusal(url, readonly=False)
        assert text.startswith(f"PostgreSQL mirror ccsync@127.0.0.1:{port}/mirror cannot be used")
        assert "Connection refused" in text and "check the host and port in [mirror] url" in text


def test_a_url_that_does_not_parse_is_one_line_without_the_password() -> None:
    text = _refusal(f"host=127.0.0.1 password={ROLE_PASSWORD} junk", readonly=True)
    assert "[mirror] url is neither a postgresql:// URL nor a libpq connection string" in text


def test_a_role_that_may_not_connect_is_named_with_the_fix(
    pg_db: str, admin: psycopg.Connection[Any], weak_role: str
) -> None:
    db = str(conninfo_to_dict(pg_db)["dbname"])
    _grant(admin, "REVOKE CONNECT ON DATABASE {} FROM PUBLIC", db)
    text = _refusal(_as(pg_db, weak_role), readonly=True)
    assert f"role {weak_role} may not connect" in text
    assert "GRANT it CONNECT on the database" in text


def test_masking_finds_the_password_in_every_form_a_url_holds() -> None:
    assert passwords("postgresql://u:s3cr%40t-x@h/db") == ["s3cr%40t-x", "s3cr@t-x"]
    assert passwords("host=h password='two words'") == ["two words"]
    assert passwords("host=h user=u") == []
    dsn = "postgresql://hunter22:hunter22@h/db"  # a user named as the password is masked too
    assert masked("role hunter22 said hunter22", dsn) == "role *** said ***"
    assert target("postgresql://u:secret@h:5/db") == "u@h:5/db"
    assert target("host=h dbname=d password=secret") == "h/d"
    assert target("") == "(libpq defaults)"


def test_the_reason_is_libpqs_message_without_its_preamble() -> None:
    message = (
        'connection failed: connection to server at "127.0.0.1", port 1 failed: '
        "Connection refused\n\tIs the server running on that host and accepting TCP/IP "
        "connections?\n"
        'connection to server at "::1", port 1 failed: FATAL:  role "x" does not exist\n'
        "DETAIL:  more"
    )
    assert reason(message) == 'Connection refused; role "x" does not exist; more'
    assert re.fullmatch(r"[^\n]+", reason("ERROR:  a\nHINT:  b")) is not None


def test_the_application_name_says_host_and_pid_within_what_the_server_keeps() -> None:
    name = application_name()
    assert name == f"ccsync@{socket.gethostname()}:{os.getpid()}"[: len(name)]
    assert name.endswith(f":{os.getpid()}")
    assert len(name.encode()) <= 63
