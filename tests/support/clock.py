"""A fake clock for the request budget's tests: time passes only when someone sleeps."""

from __future__ import annotations

import asyncio


class FakeClock:
    """Time that passes only when someone sleeps."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)
        await asyncio.sleep(0)
