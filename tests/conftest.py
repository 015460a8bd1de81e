"""Shared fixtures, defined here once: the bundled emulator served over real HTTP on 127.0.0.1 (a
free port), a client of it, an empty mirror in the test's directory, and a private PostgreSQL
server (`pg_dsn`, one per test process, started only when a test asks) with a fresh database
per test (`pg_db`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from sync.core import logs
from sync.emulator import Emulator
from sync.store import Mirror
from tests.support.emulator_client import Signed, signed


@pytest.fixture(autouse=True)
def _quiet_logs() -> None:
    """Tests capture logs explicitly; keep the default output small."""
    structlog.reset_defaults()
    logs.reset()  # a command run in this process bridged the standard library's logging


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    """A served emulator with a small data set (seed 7)."""
    emu = Emulator(resources=300, seed=7, webhook_window=0.01, webhook_retry_interval=0.05)
    async with emu.serve(port=0):
        yield emu


@pytest.fixture
async def api(emulator: Emulator) -> AsyncIterator[Signed]:
    """A client of `emulator`, logged in as its demo account."""
    async with signed(emulator) as client:
        yield client


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[Mirror]:
    """An empty mirror at `tmp_path / "m.db"`, closed after the test."""
    m = Mirror.open(tmp_path / "m.db")
    yield m
    m.close()


@pytest.fixture
def make_emulator() -> Callable[..., contextlib.AbstractAsyncContextManager[Emulator]]:
    """A factory: `async with make_emulator(resources=..., channels=...) as emu:`."""

    @contextlib.asynccontextmanager
    async def make(**kwargs: Any) -> AsyncIterator[Emulator]:
        kwargs.setdefault("webhook_window", 0.01)
        kwargs.setdefault("webhook_retry_interval", 0.05)
        emu = Emulator(**kwargs)
        async with emu.serve(port=0):
            yield emu

    return make


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A PostgreSQL server's DSN: `SYNC_TEST_PG_DSN` when set, else a private server started
    from the machine's binaries (`tests.support.postgres`), once per test process (each xdist
    worker has its own) and only when a test asks for it; stopped at the end of the session.
    No server is a failure with one line saying what to install, never a skip."""
    from tests.support import postgres  # psycopg only for the tests that use it

    given = os.environ.get(postgres.ENV_DSN)
    if given:
        yield given
        return
    try:
        server = postgres.start()
    except postgres.PostgresUnavailable as exc:
        failure = str(exc)
    else:
        failure = ""
    if failure:  # outside the except: the one line, without the exception it replaces
        pytest.fail(failure, pytrace=False)
    try:
        yield server.dsn
    finally:
        server.stop()


@pytest.fixture
def pg_db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a new, empty database on `pg_dsn`'s server, dropped after the test."""
    from tests.support.postgres import fresh_database

    with fresh_database(pg_dsn) as dsn:
        yield dsn
