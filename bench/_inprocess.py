"""The daemon's own parts over an in-process emulator, backfilled, for the benches that count
requests rather than time (`route_cost.py`, `creation_cost.py`): the set-up they share."""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sync.core.config import parse_config
from sync.daemon.running import Running, open_running
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill


@asynccontextmanager
async def backfilled(emu: Emulator, **upstream: Any) -> AsyncIterator[tuple[Running, float]]:
    """The daemon's parts (`open_running`) over a fresh mirror of `emu` (served), backfilled
    with the request budget off; and the backfill's seconds. `upstream` adds `[upstream]`
    keys (`types`, ...)."""
    db = Path(tempfile.mkdtemp()) / "m.db"
    settings = parse_config(
        {
            "upstream": {
                "base_url": emu.base_url,
                "email": emu.email,
                "password": emu.password,
                "max_requests_per_second": 0,
                **upstream,
            },
            "mirror": {"path": str(db)},
        }
    )
    d = Daemon(settings)
    async with open_running(
        settings,
        state=d.state,
        metrics=d.metrics,
        faults=d.type_faults,
        storage=d.storage,
        progress=d.progress,
        stop=d.stop,
    ) as running:
        t0 = time.monotonic()
        await Backfill(running.client, running.mirror, settings).run()
        yield running, time.monotonic() - t0
