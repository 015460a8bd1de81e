"""Waiting for a condition: tests assert outcomes, never how long they took."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Wait until `check()` holds (no timing assertion: only an upper bound against hangs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
