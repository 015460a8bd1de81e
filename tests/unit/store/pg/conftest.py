"""The PostgreSQL store's contract tests: fixtures shared by several of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.twin_books import Twin, postgres_twin, sqlite_twin


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
