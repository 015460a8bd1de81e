"""Emulator speed and memory: pages of 100 resources served per second, against the 2,000
pages/s target, and the emulator's peak memory (RSS), at each data set size given.

The emulator runs as its own process (`ccsync emulator`, one core, no page cache); this process
drives it with aiohttp at a fixed concurrency over signed page requests of the top-level
collections, after a warm-up pass. Peak RSS is the kernel's high-water mark of the emulator
process (`VmHWM`) and the largest RSS psutil sampled every 0.1 s, whichever is larger, over
its start-up and both passes. Run:

    .venv/bin/python bench/emulator_speed.py [--resources 200000,1000000] [--pages 6000] \
        [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
TARGET = 2000.0
RSS_LIMIT_1M = 3 * 10**9  # issue #21: 1,000,000 resources under 3 GB without the page cache
PATHS = ["deals", "articles", "events", "job-listings", "mall-messages", "contacts"]


async def start_emulator(resources: int) -> tuple[asyncio.subprocess.Process, str, PeakRss]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sync",
        "emulator",
        "--resources",
        str(resources),
        "--port",
        "0",
        cwd=ROOT,
        env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    peak = PeakRss(proc.pid)
    line = (await proc.stdout.readline()).decode()
    await proc.stdout.readline()
    return proc, line.strip().rsplit(" ", 1)[1], peak


async def login(http: aiohttp.ClientSession, base: str) -> str:
    body = {
        "data": {
            "type": "accounts",
            "attributes": {"email": "demo@example.com", "password": "demo-password"},
        }
    }
    headers = {"Content-Type": "application/vnd.api+json"}  # JSON:API body: the strict type
    async with http.post(f"{base}/accounts/login", json=body, headers=headers) as r:
        return str((await r.json(content_type=None))["data"]["attributes"]["authentication_token"])


def signed(token: str) -> dict[str, str]:
    ts = int(time.time())
    return {
        "auth_id": "demo@example.com",
        "auth_timestamp": f"{ts:010d}",
        "auth_token": hashlib.md5(f"{ts}:{token}".encode(), usedforsecurity=False).hexdigest(),
    }


async def drive(
    http: aiohttp.ClientSession,
    base: str,
    token: str,
    jobs: list[tuple[str, int]],
    concurrency: int,
) -> tuple[int, int]:
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    counts = [0, 0]

    async def worker() -> None:
        while not queue.empty():
            path, number = queue.get_nowait()
            params = {
                "page[size]": "100",
                "page[number]": str(number),
                "sort": "id",
                **signed(token),
            }
            async with http.get(f"{base}/{path}", params=params) as r:
                body = await r.read()
                assert r.status == 200, body[:200]
            counts[0] += 1
            # Only full pages are requested; parsing here would measure this client, not the server.
            counts[1] += 100

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts[0], counts[1]


class PeakRss:
    """The largest RSS of one process: psutil sampled in the background, and `VmHWM`."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._task = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.proc.memory_info().rss)
            await asyncio.sleep(0.1)

    def stop(self) -> int:
        self._task.cancel()
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak = max(self.peak, int(line.split()[1]) * 1024)
        return self.peak


async def measure(resources: int, pages: int, concurrency: int) -> tuple[float, float, int]:
    """(start-up seconds, pages per second, peak RSS bytes) of one emulator."""
    t0 = time.perf_counter()
    proc, base, peak = await start_emulator(resources)
    startup = time.perf_counter() - t0
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
            token = await login(http, base)
            lasts = {}
            for path in PATHS:
                async with http.get(
                    f"{base}/{path}",
                    params={"page[size]": "100", "page[number]": "1", **signed(token)},
                ) as r:
                    doc = await r.json(content_type=None)
                assert "links" in doc, doc
                lasts[path] = int(parse_qs(urlsplit(doc["links"]["last"]).query)["page[number]"][0])
            full = [
                (p, n) for p in PATHS for n in range(1, max(1, lasts[p] - 1) + 1)
            ]  # full pages only
            jobs = [full[i % len(full)] for i in range(pages)]
            await drive(http, base, token, jobs, concurrency)  # warm-up: fills the byte caches
            t1 = time.perf_counter()
            served, rows = await drive(http, base, token, jobs, concurrency)
            elapsed = time.perf_counter() - t1
        rss = peak.stop()
    finally:
        peak.stop()
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    assert rows == served * 100
    return startup, served / elapsed, rss


async def main(sizes: list[int], pages: int, concurrency: int) -> None:
    results = [(n, *await measure(n, pages, concurrency)) for n in sizes]
    print(f"emulator speed and memory: {pages:,} pages of 100 a size, concurrency {concurrency}")
    print(f"{'resources':>12}{'start-up s':>12}{'pages/s':>10}{'peak RSS MB':>13}")
    for n, startup, rate, rss in results:
        print(f"{n:>12,}{startup:>12.1f}{rate:>10,.0f}{rss / 1e6:>13,.0f}")
    print(f"{'target':>12}{'':>12}{TARGET:>10,.0f}{RSS_LIMIT_1M / 1e6:>13,.0f}  (RSS: at 1M)")
    for n, _, rate, rss in results:
        line = f"ratio emulator/target at {n:,}: speed {rate / TARGET:.2f}"
        if n == 1_000_000:
            line += f", peak RSS {rss / RSS_LIMIT_1M:.2f}"
        print(line)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--resources",
        default="200000,1000000",
        help="comma-separated data set sizes (default: 200000,1000000)",
    )
    ap.add_argument("--pages", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    asyncio.run(main([int(x) for x in a.resources.split(",")], a.pages, a.concurrency))
