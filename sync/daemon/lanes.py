"""Lanes: one per type for the polls, so that one type's walk never holds up the others'.

A poll cycle starts each due type's poll in its lane and waits for them up to the poll
interval. A type whose poll outlasts that (a listing with many changes, an upstream slow on one
route) goes on in its lane while the job ends and the next cycle polls every other type; its
own lane is skipped until it is free. What every lane sends still shares the one request
budget (`sync.channel.budget`), where the polls' requests are granted oldest first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping


class Lanes:
    """The polls in flight, one task per key (a type's name)."""

    def __init__(self, limit: int) -> None:
        #: At most this many lanes poll at once (`[upstream] concurrency`).
        self.slots = asyncio.Semaphore(max(1, limit))
        self.busy: dict[str, asyncio.Task[None]] = {}

    def running(self) -> list[str]:
        """The keys whose lane is still busy."""
        return sorted(k for k, t in self.busy.items() if not t.done())

    async def run(
        self, work: Mapping[str, Callable[[], Awaitable[None]]], within: float
    ) -> list[str]:
        """Start `work[key]()` in each free lane (a busy one is left as it is) and wait up to
        `within` seconds for them; the keys still running then. A lane's failure is its
        work's to handle (`Bodies._isolated`): it is retrieved here, never raised."""
        started: list[asyncio.Task[None]] = []
        for key, start in work.items():
            if key in self.running():
                continue
            task = asyncio.create_task(self._in_slot(start), name=f"poll:{key}")
            self.busy[key] = task
            started.append(task)
        if started:
            await asyncio.wait(started, timeout=within)
        for key in [k for k, t in self.busy.items() if t.done()]:
            task = self.busy.pop(key)
            if not task.cancelled():
                task.exception()  # retrieved: asyncio prints the failures nobody asked for
        return self.running()

    async def _in_slot(self, start: Callable[[], Awaitable[None]]) -> None:
        async with self.slots:
            await start()

    async def close(self) -> None:
        """Cancel every lane still polling (the daemon stops)."""
        tasks = list(self.busy.values())
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        self.busy.clear()
