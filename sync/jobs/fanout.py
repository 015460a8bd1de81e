"""Fan-out: run one coroutine per item with a bound on how many are in flight at once.

Every job that fans out (the backfill's scopes and pages, the malls' hours, the daemon's polls)
goes through `bounded`, so a first failure stops its siblings the same way everywhere: a bare
`gather` would leave them writing to a mirror the caller is about to close.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def bounded(items: Iterable[T], limit: int, fn: Callable[[T], Awaitable[None]]) -> None:
    """Run `fn` over `items` with at most `limit` in flight, without materialising all tasks.

    The first failure cancels the rest and is re-raised, so a fatal error stops the run promptly.
    """
    pending: set[asyncio.Task[None]] = set()
    try:
        for item in items:
            if len(pending) >= limit:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                _raise_first(done)
            pending.add(asyncio.ensure_future(fn(item)))
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            _raise_first(done)
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def _raise_first(done: set[asyncio.Task[None]]) -> None:
    """Re-raise the first failure among `done`, having retrieved every one: asyncio prints the
    traceback of a failed task nobody asked, and two pages can fail in one round."""
    failures = [t.exception() for t in done if not t.cancelled()]
    for exc in failures:
        if exc is not None:
            raise exc
