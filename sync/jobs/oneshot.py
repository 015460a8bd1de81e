"""A one-shot job's connections: the mirror and the upstream client, opened from the settings.

`ccsync backfill`, `ccsync reconcile` and its `--full` verify each run one job outside the
daemon; they open the mirror first (a mirror that cannot be opened fails before any request)
and close it last, whatever the job did. A mirror file the command created itself is removed
again (with its `-wal`, `-shm` and `.lock`) when no account ever logged in: a wrong password or
an unreachable upstream leaves no empty mirror behind. An existing mirror is never removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.store import Mirror, MirrorStore, file


@contextlib.asynccontextmanager
async def connected(settings: Settings) -> AsyncIterator[tuple[ChannelClient, MirrorStore]]:
    """The client and the mirror of `settings`, both closed on the way out."""
    path = settings.mirror.path
    existed = file.identity(path) is not None
    mirror = Mirror.open(path, checkpoints=settings.mirror.checkpoints)
    created = None if existed else file.identity(path)
    logged_in = False
    try:
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            try:
                yield client, mirror
            finally:
                logged_in = any(a.credentials.has_token for a in client.accounts.all)
    finally:
        mirror.close()
        if created is not None and not logged_in:
            file.discard(path, created)
