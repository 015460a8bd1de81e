"""One backfill of a served emulator into a mirror file: the set-up many suites share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.core.config import Settings, parse_config
from sync.emulator import Emulator
from sync.jobs.backfill import Backfill
from sync.store import Mirror


def settings_for(emu: Emulator, db: Path, **upstream: Any) -> Settings:
    """Settings reading `emu` into `db`; `upstream` adds or overrides `[upstream]` keys."""
    return parse_config(
        {
            "upstream": {
                "base_url": emu.base_url,
                "email": emu.email,
                "password": emu.password,
                **upstream,
            },
            "mirror": {"path": str(db)},
        }
    )


async def backfill(emu: Emulator, db: Path, **upstream: Any) -> Settings:
    """Backfill `emu` into `db` (closed afterwards); returns the settings used."""
    settings = settings_for(emu, db, **upstream)
    mirror = Mirror.open(db)
    try:
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
    finally:
        mirror.close()
    return settings
