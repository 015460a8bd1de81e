"""sync.daemon.lanes: a slow type's poll never holds up the others; its lane is skipped while
busy, and every lane is cancelled when the daemon stops."""

from __future__ import annotations

import asyncio

from sync.daemon.lanes import Lanes


async def test_a_slow_lane_goes_on_while_the_cycle_ends_and_the_next_skips_only_it() -> None:
    lanes = Lanes(limit=4)
    done: list[str] = []
    release = asyncio.Event()

    async def slow() -> None:
        await release.wait()
        done.append("deals")

    async def fast(name: str) -> None:
        done.append(name)

    busy = await lanes.run({"deals": slow, "articles": lambda: fast("articles")}, within=0.05)
    assert busy == ["deals"] and done == ["articles"]
    started: list[str] = []

    async def again() -> None:
        started.append("deals")

    # The next cycle: deals' lane is busy (not started twice), articles is polled again.
    busy = await lanes.run({"deals": again, "articles": lambda: fast("articles")}, within=0.05)
    assert busy == ["deals"] and started == [] and done == ["articles", "articles"]
    release.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert await lanes.run({}, within=0.01) == [] and done[-1] == "deals"
    await lanes.close()


async def test_a_failing_lane_is_retrieved_and_closing_cancels_what_still_runs() -> None:
    lanes = Lanes(limit=1)
    forever = asyncio.Event()

    async def fails() -> None:
        raise RuntimeError("handled by the caller's isolation in the daemon")

    async def hangs() -> None:
        await forever.wait()

    assert await lanes.run({"a": fails, "b": hangs}, within=0.05) == ["b"]
    await lanes.close()
    assert lanes.running() == []
