"""A one-shot job's connections: the mirror and the upstream client, opened from the settings.

`ccsync backfill`, `ccsync reconcile` and its `--full` verify each run one job outside the
daemon; they open the mirror first (a mirror that cannot be opened fails before any request)
and close it last, whatever the job did. A mirror file the command created itself is removed
again (with its `-wal`, `-shm` and `.lock`) when no account ever logged in: a wrong password or
an unreachable upstream leaves no empty mirror behind. An existing mirror is never removed. A
PostgreSQL mirror (`[mirror] url`) is opened as well, and never removed: a schema the writer
created stays, empty, as a database would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.store import MirrorStore, file
from sync.store.opening import open_mirror


@contextlib.asynccontextmanager
async def connected(settings: Settings) -> AsyncIterator[tuple[ChannelClient, MirrorStore]]:
    """The client and the mirror of `settings`, both closed on the way out."""
    target = settings.mirror.target
    path = target.path  # None: a PostgreSQL mirror, nothing to remove
    existed = path is None or file.identity(path) is not None
    mirror = open_mirror(target, checkpoints=settings.mirror.checkpoints)
    created = None if existed or path is None else file.identity(path)
    logged_in = False
    try:
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            try:
                yield client, mirror
            finally:
                logged_in = any(a.credentials.has_token for a in client.accounts.all)
    finally:
        mirror.close()
        if path is not None and created is not None and not logged_in:
            file.discard(path, created)
