"""The daemon run inside the test's process: started, awaited until ready, always stopped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sync.core.config import Settings
from sync.daemon.service import Daemon
from tests.support.waiting import eventually


@asynccontextmanager
async def running(settings: Settings, *, check_every: float | None = None) -> AsyncIterator[Daemon]:
    """The daemon, backfilled and ready; stopped on leaving. `check_every`: how often it
    checks that its mirror takes writes (seconds), for the suites that fill or lock it."""
    daemon = Daemon(settings)
    if check_every is not None:
        daemon.storage.interval = daemon.storage.healthy_interval = check_every
    task = asyncio.create_task(daemon.run())
    try:
        await eventually(lambda: daemon.is_ready or task.done(), timeout=60)
        if task.done():
            task.result()
        yield daemon
    finally:
        daemon.request_stop()
        await asyncio.wait_for(task, timeout=15)
