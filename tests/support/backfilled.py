"""One backfill of a served emulator into a mirror file: the set-up many suites share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.store.opening import open_mirror
from tests.support.settings import settings_for


async def run_backfill(
    settings: Settings,
    *,
    wrap: Callable[[ChannelClient], None] | None = None,
    restart: bool = False,
) -> Any:
    """Backfill the mirror `settings` name (an SQLite file or a PostgreSQL schema; closed
    afterwards); the backfill's report. `wrap` sees the client first (to count or break its
    requests)."""
    mirror = open_mirror(settings.mirror.target)
    try:
        # As `ccsync backfill` builds it: what the client learns kept in this mirror.
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            if wrap:
                wrap(client)
            return await Backfill(client, mirror, settings).run(restart=restart)
    finally:
        mirror.close()


async def backfill(
    emu: Emulator,
    db: Path,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
    **upstream: Any,
) -> Settings:
    """Backfill `emu` into `db` (closed afterwards); returns the settings used (see
    `settings_for` for `sections` and `upstream`)."""
    settings = settings_for(emu, db, sections, **upstream)
    await run_backfill(settings)
    return settings
