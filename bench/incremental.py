"""Incremental cost: one poll after k changes, on a mirror of ~100,000 rows: requests and time.

Shows that a poll's cost grows with the number of changes k, not with the size of the mirror:
the requests of one type and scope stay within ceil(k/100) + 1. The emulator runs in-process.
Run:  .venv/bin/python bench/incremental.py [--resources 125000]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.core.config import parse_config
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.incremental.poll import Poller
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.store import Mirror


async def main(resources: int) -> None:
    emu = Emulator(resources=resources, seed=5)
    async with emu.serve(port=0):
        with tempfile.TemporaryDirectory() as tmp:
            settings = parse_config(
                {
                    "upstream": {
                        "base_url": emu.base_url,
                        "email": emu.email,
                        "password": emu.password,
                    },
                    "mirror": {"path": str(Path(tmp) / "m.db")},
                    "logging": {"level": "error"},
                }
            )
            mirror = Mirror.open(settings.mirror.path)
            async with ChannelClient(settings.upstream) as client:
                await Backfill(client, mirror, settings).run()
                total = sum(mirror.table(t).count() for t in catalogue.LISTABLE)
                calls = [0]
                original = client.list_page

                async def counted(*args: Any, **kwargs: Any) -> Page:
                    calls[0] += 1
                    return await original(*args, **kwargs)

                client.list_page = counted  # type: ignore[method-assign]
                poller = Poller(client, mirror, page_size=100, overlap=0.0)
                rtype = catalogue.TYPES["deals"]
                public = scopes_of(rtype, [])[0]
                ids = emu.ids("deals", visibility="Public")
                print(
                    f"incremental cost: mirror of {total:,} rows; one poll of deals [visibility Public]"
                )
                print(
                    f"{'k changes':>10}{'requests':>10}{'bound':>8}{'seconds':>10}{'rows read':>11}"
                )
                for k in (1, 10, 100, 1000):
                    for rid in ids[:k]:
                        emu.update("deals", rid)
                    calls[0] = 0
                    t0 = time.perf_counter()
                    result = await poller.poll_scope(public)
                    dt = time.perf_counter() - t0
                    bound = math.ceil(k / 100) + 1
                    print(f"{k:>10}{calls[0]:>10}{bound:>8}{dt:>10.3f}{result.rows:>11}")
            mirror.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resources", type=int, default=125_000)
    a = ap.parse_args()
    asyncio.run(main(a.resources))
