"""Freshness: webhook received to row committed, p50 and p99 over N changes, on loopback.

The emulator (in a subprocess would hide nothing: it only sends the notices) and the daemon run on
one event loop here, which is pessimistic: the emulator's work competes with the daemon's. The
queue debounce (`queue_batch_delay`) is set to 0 so the figure is the daemon's own latency.
Run:  .venv/bin/python bench/freshness.py [--changes 1000] [--rate 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sync.core import logs
from sync.core.config import parse_config
from sync.daemon.service import Daemon
from sync.emulator import Emulator

GOAL_MS = 100.0


@dataclass(frozen=True)
class Latencies:
    """Webhook received to row committed, in ms, sorted; and the changes never committed."""

    ms: list[float]
    missing: int

    @property
    def p50(self) -> float:
        return statistics.median(self.ms)

    @property
    def p99(self) -> float:
        return self.ms[min(len(self.ms) - 1, int(len(self.ms) * 0.99))]


async def measure(changes: int, rate: float, section: dict[str, str] | None = None) -> Latencies:
    """Run the daemon over an in-process emulator and time `changes` webhooks sent at `rate`
    a second; `section` is the `[mirror]` section (default: an SQLite file in a temporary
    directory)."""
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
                        "max_requests_per_second": 0,
                    },
                    "mirror": section or {"path": str(Path(tmp) / "m.db")},
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
            logs.configure(settings.logging.level)  # as `ccsync run` does: errors only
            daemon = Daemon(settings)
            task = asyncio.create_task(daemon.run())
            while not daemon.is_ready:
                await asyncio.sleep(0.05)
            received: dict[int, float] = {}
            committed: dict[int, float] = {}
            running = daemon.running
            assert running is not None  # ready: the mirror is open and the client connected
            queue = running.queue
            enqueue = queue.enqueue

            def timed_enqueue(notices: Any, *args: Any, **kwargs: Any) -> int:
                now = time.perf_counter()
                for n in notices:
                    received.setdefault(n.resource_id, now)
                return enqueue(notices, *args, **kwargs)

            queue.enqueue = timed_enqueue  # type: ignore[method-assign]
            mirror = running.mirror
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
    return Latencies(lat, len(wanted) - len(lat))


def report(lat: Latencies, changes: int, rate: float, label: str = "sync") -> None:
    """The p50, p99 and max, beside the goal."""
    print(
        f"freshness: {len(lat.ms)} changes at {rate:.0f}/s, webhook received -> row committed (debounce 0)"
    )
    print(f"{'':<12}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    print(f"{label:<12}{lat.p50:>10.1f}{lat.p99:>10.1f}{lat.ms[-1]:>10.1f}")
    print(f"{'goal':<12}{'':>10}{GOAL_MS:>10.1f}")
    print(
        f"ratio p99/goal: {lat.p99 / GOAL_MS:.2f} (below 1 meets the goal); missing: {lat.missing}"
    )


@contextlib.contextmanager
def postgres_mirror(dsn: str | None) -> Iterator[dict[str, str]]:
    """The `[mirror]` section of a PostgreSQL mirror: in the database `dsn`, else in a fresh
    database of a private server with PostgreSQL's defaults (stopped after)."""
    from _pg import DEFAULTS, as_url, server

    from tests.support import postgres

    if dsn:
        yield {"url": as_url(dsn), "schema": "ccsync"}
        return
    with server(None, DEFAULTS) as (private, _), postgres.fresh_database(private) as db:
        yield {"url": as_url(db), "schema": "ccsync"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", help="with --store postgres: the database (else a private server)")
    a = ap.parse_args()
    with contextlib.ExitStack() as stack:
        mirror = stack.enter_context(postgres_mirror(a.dsn)) if a.store == "postgres" else None
        lat = asyncio.run(measure(a.changes, a.rate, mirror))
    report(lat, a.changes, a.rate, a.store)


if __name__ == "__main__":
    main()
