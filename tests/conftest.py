"""Shared fixtures, defined here once: the bundled emulator served over real HTTP on 127.0.0.1 (a
free port), a client of it, and an empty mirror in the test's directory."""

from __future__ import annotations

import contextlib
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
