"""A one-shot job's connections: the mirror and the upstream client, opened from the settings.

`ccsync backfill`, `ccsync reconcile` and its `--full` verify each run one job outside the
daemon; they open the mirror first (a mirror that cannot be opened fails before any request)
and close it last, whatever the job did.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.store import Mirror


@contextlib.asynccontextmanager
async def connected(settings: Settings) -> AsyncIterator[tuple[ChannelClient, Mirror]]:
    """The client and the mirror of `settings`, both closed on the way out."""
    mirror = Mirror.open(settings.mirror.path, checkpoints=settings.mirror.checkpoints)
    try:
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            yield client, mirror
    finally:
        mirror.close()
