"""Freshness: webhook received to row committed, p50 and p99 over N changes, on loopback.

The emulator (in a subprocess would hide nothing: it only sends the notices) and the daemon run on
one event loop here, which is pessimistic: the emulator's work competes with the daemon's. The
queue debounce (`queue_batch_delay`) is set to 0 so the figure is the daemon's own latency.
Run:  .venv/bin/python bench/freshness.py [--changes 1000] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sync.core.config import parse_config
from sync.daemon.service import Daemon
from sync.emulator import Emulator

GOAL_MS = 100.0


async def main(changes: int, rate: float) -> None:
    emu = Emulator(resources=10000, seed=3, webhook_window=0.0)
    async with emu.serve(port=0):
        with tempfile.TemporaryDirectory() as tmp:
            settings = parse_config(
                {
                    "upstream": {
                        "base_url": emu.base_url,
                        "email": emu.email,
                        "password": emu.password,
                        "types": ["malls", "deals", "articles"],
                    },
                    "mirror": {"path": str(Path(tmp) / "m.db")},
                    "webhooks": {"listen": "127.0.0.1:0", "secret": "bench-secret-0123456789"},
                    "schedule": {
                        "queue_batch_delay": 0.0,
                        "poll_interval": 3600,
                        "deletions_interval": 3600,
                        "reconcile_interval": 3600,
                        "hours_interval": 3600,
                    },
                    "logging": {"level": "error"},
                }
            )
            daemon = Daemon(settings)
            task = asyncio.create_task(daemon.run())
            while not daemon.is_ready:
                await asyncio.sleep(0.05)
            received: dict[int, float] = {}
            committed: dict[int, float] = {}
            queue = daemon.queue
            enqueue = queue.enqueue

            def timed_enqueue(notices: Any) -> int:
                now = time.perf_counter()
                for n in notices:
                    received.setdefault(n.resource_id, now)
                return enqueue(notices)

            queue.enqueue = timed_enqueue  # type: ignore[method-assign]
            mirror = daemon.mirror
            write = mirror.write_staged

            def timed_write(batches: Any, *args: Any, **kwargs: Any) -> Any:
                result = write(batches, *args, **kwargs)
                now = time.perf_counter()
                for rid in batches[0].ids:  # the listed rows; included ones are not timed
                    committed.setdefault(rid, now)
                return result

            mirror.write_staged = timed_write  # type: ignore[method-assign]
            ids = emu.ids("deals")
            targets = [ids[i % len(ids)] for i in range(changes)]
            for i, rid in enumerate(dict.fromkeys(targets)):
                emu.update("deals", rid, {"title": f"fresh {i}"})
                await asyncio.sleep(1.0 / rate)
            deadline = time.perf_counter() + 30
            wanted = {int(r) for r in dict.fromkeys(targets)}
            while not wanted <= set(committed) and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
            daemon.request_stop()
            await task
    lat = sorted(
        (committed[i] - received[i]) * 1000 for i in wanted if i in committed and i in received
    )
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(
        f"freshness: {len(lat)} changes at {rate:.0f}/s, webhook received -> row committed (debounce 0)"
    )
    print(f"{'':<12}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    print(f"{'sync':<12}{p50:>10.1f}{p99:>10.1f}{lat[-1]:>10.1f}")
    print(f"{'goal':<12}{'':>10}{GOAL_MS:>10.1f}")
    print(
        f"ratio p99/goal: {p99 / GOAL_MS:.2f} (below 1 meets the goal); missing: {len(wanted) - len(lat)}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100.0)
    a = ap.parse_args()
    asyncio.run(main(a.changes, a.rate))
