"""The daemon's record of its own sync: when it started, when each type last synced in this
process, whether it is ready (backfilled and serving), and why its first backfill failed while
it waits to ask again.

The job bodies write it (`sync.daemon.bodies`), the service marks it ready
(`sync.daemon.service`), and the health report and the live gauges read it
(`sync.daemon.health`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sync.model.catalogue import ResourceType


class SyncState:
    """The daemon's record of its own sync; see the module docstring."""

    def __init__(self, types: Sequence[ResourceType]) -> None:
        self.types = list(types)
        self.started = time.monotonic()
        #: Monotonic time of each type's last successful sync in this process.
        self.last_ok: dict[str, float] = {}
        self.ready = False  # backfilled and serving
        #: Why the first backfill failed and when it is asked again; None once it succeeds.
        self.backfill_failed: str | None = None

    def synced(self, name: str) -> None:
        self.last_ok[name] = time.monotonic()

    def skipped(self, name: str) -> None:
        """Type `name` is not readable by this account: not stale, so health ignores it."""
        self.last_ok.pop(name, None)
