"""The PostgreSQL store's contract tests: fixtures shared by several of them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sync.store import Mirror, MirrorStore
from sync.store.pg.mirror import PgMirror
from tests.support.postgres import ROLE_PASSWORD
from tests.support.twin_books import SCHEMA, Twin, postgres_twin, sqlite_twin


@pytest.fixture(params=["sqlite", "postgres"])
def twin(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Twin]:
    """Either store with its books, empty (the PostgreSQL server is started only for the
    `postgres` runs)."""
    if request.param == "sqlite":
        yield from sqlite_twin(tmp_path)
    else:
        yield from postgres_twin(request.getfixturevalue("pg_db"))


@pytest.fixture
def conn(pg_db: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to a fresh database, in autocommit: each write is its own transaction."""
    with psycopg.connect(pg_db, autocommit=True) as c:
        yield c


@pytest.fixture
def admin(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """`conn` (the superuser's), by the name tests that make roles and grant rights use."""
    return conn


@pytest.fixture
def weak_role(admin: psycopg.Connection[Any]) -> Iterator[str]:
    """A login role with `ROLE_PASSWORD`, none of whose rights are granted by this fixture;
    dropped after the test (roles are the server's, shared by every test)."""
    name = f"weak_{uuid.uuid4().hex[:12]}"
    admin.execute(
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(name), sql.Literal(ROLE_PASSWORD)
        )
    )
    yield name
    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", "postgres"])
def either(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MirrorStore]:
    """Either store's whole mirror, empty (the server is started for `postgres` only)."""
    opened: MirrorStore = (
        Mirror.open(tmp_path / "m.db")
        if request.param == "sqlite"
        else PgMirror.open(request.getfixturevalue("pg_db"), SCHEMA)
    )
    try:
        yield opened
    finally:
        opened.close()
