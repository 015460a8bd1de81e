"""Emulator speed: pages of 100 resources served per second, against the 2,000 pages/s target.

The emulator runs as its own process (`sync emulator`, one core); this process drives it with
aiohttp at a fixed concurrency over signed page requests of the top-level collections, after a
warm-up pass that fills the encoded-resource caches. Run:

    .venv/bin/python bench/emulator_speed.py [--resources 200000] [--pages 6000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
TARGET = 2000.0
PATHS = ["deals", "articles", "events", "job-listings", "mall-messages", "contacts"]


async def start_emulator(resources: int) -> tuple[asyncio.subprocess.Process, str]:
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
    line = (await proc.stdout.readline()).decode()
    await proc.stdout.readline()
    return proc, line.strip().rsplit(" ", 1)[1]


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


async def main(resources: int, pages: int, concurrency: int) -> None:
    t0 = time.perf_counter()
    proc, base = await start_emulator(resources)
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
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    rate = served / elapsed
    print(
        f"emulator speed: {resources:,} resources (start-up {startup:.1f}s), {served:,} pages, concurrency {concurrency}"
    )
    print(f"{'':<28}{'pages/s':>10}{'resources/s':>14}")
    print(f"{'emulator (measured)':<28}{rate:>10,.0f}{rows / elapsed:>14,.0f}")
    print(f"{'target':<28}{TARGET:>10,.0f}{TARGET * 100:>14,.0f}")
    print(f"ratio emulator/target: {rate / TARGET:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resources", type=int, default=200_000)
    ap.add_argument("--pages", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args()
    asyncio.run(main(a.resources, a.pages, a.concurrency))
