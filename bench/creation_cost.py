"""Requests per mall-scoped creation announced by a webhook, on the per-mall path, in process.

The emulator (in this process, no latency) serves `--resources` resources in `--malls` malls
and does not serve `GET /malls?include=` (`emu.app.mall_includes = False`: the fallback path,
every mall-scoped type listed per mall); a mirror of the default types is backfilled (budget
off); the daemon's own parts are opened on it (`sync.daemon.running.open_running`, the job
bodies), the mall includes are detected (per mall) and one poll cycle runs, as the daemon's
first would. Then, for each of `--creations` creations (the five types listed only per mall in
turn, each in a mall picked at random), the row is created upstream, its update notice put in
the durable queue as the receiver would, and the queue worker drains it
(`QueueWorker.drain_type`); the requests the emulator served meanwhile are that creation's
cost, and the row must be in the mirror after it. The same again with the creation in a mall
a notice just named (an update of a row the mirror holds there, its one request not counted):
the recently active malls the worker tries first. Nothing else runs meanwhile (no polls, no
proof), so the count is the notice's path alone.

Run:  PYTHONPATH=. .venv/bin/python bench/creation_cost.py [--malls 1000] [--resources 20000]
      [--creations 5] [--json]
Bounded: about a minute at 1,000 malls and 20,000 resources on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from typing import Any

from _inprocess import backfilled

from sync.core.logs import configure
from sync.daemon.bodies import Bodies
from sync.daemon.running import Running
from sync.emulator import Emulator
from sync.model.notices import WebhookNotice
from sync.store.queue import ChangeQueue

#: The types listed only per mall (no route of their own).
MALL_ONLY = ["stores", "products", "programs", "press_releases", "social_feeds"]
GOAL = 10.0  # requests per mall-scoped creation (issue #17)


async def _announce(emu: Emulator, running: Running, type_name: str, rid: int) -> int:
    """Queue an update notice for `rid` and drain it; the requests served meanwhile."""
    ChangeQueue(running.mirror.conn).enqueue([WebhookNotice("update", type_name, type_name, rid)])
    before = emu.requests.total
    await running.worker.drain_type(type_name)
    return emu.requests.total - before


async def measure(malls: int, resources: int, creations: int, seed: int = 1) -> dict[str, Any]:
    """Requests per creation in a random mall (`cold`) and in a recently active one (`hot`)."""
    rng = random.Random(seed)
    emu = Emulator(resources=resources, seed=7, malls=malls)
    emu.app.mall_includes = False
    async with emu.serve(port=0), backfilled(emu) as (running, backfill_s):
        bodies = Bodies(running, subscriptions=None)  # type: ignore[arg-type]
        t0 = time.monotonic()
        n0 = emu.requests.total
        await bodies.poll_all()  # detects the includes first: per mall here
        cycle = emu.requests.total - n0
        cycle_s = time.monotonic() - t0
        fast = [t.name for t in running.members.fast()]
        mall_ids = [int(m) for m in emu.ids("malls")]
        out: dict[str, list[int]] = {"cold": [], "hot": []}
        missing = 0
        for where in ("cold", "hot"):
            for i in range(creations):
                name = MALL_ONLY[i % len(MALL_ONLY)]
                mall = rng.choice(mall_ids)
                if where == "hot":
                    held = int(rng.choice(emu.ids(name)))
                    mall = int(emu.mall_of(name, held) or mall)
                    emu.update(name, held)
                    await _announce(emu, running, name, held)  # its mall is now active
                rid = int(emu.create(name, None, mall_id=mall))
                out[where].append(await _announce(emu, running, name, rid))
                missing += running.mirror.table(name).get(rid) is None
    return {
        "malls": malls,
        "resources": resources,
        "cold": out["cold"],
        "hot": out["hot"],
        "missing": missing,
        "fast": fast,
        "cycle": cycle,
        "cycle_s": cycle_s,
        "backfill_s": backfill_s,
    }


def mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else float("nan")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malls", type=int, default=1000)
    ap.add_argument("--resources", type=int, default=20_000)
    ap.add_argument("--creations", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="the figures as one JSON line")
    args = ap.parse_args()
    configure("warning")
    got = await measure(args.malls, args.resources, args.creations)
    if args.json:
        print(json.dumps(got))
        return
    for where in ("cold", "hot"):
        per = got[where]
        print(
            f"{where}: requests per creation {', '.join(map(str, per))}; mean {mean(per):.1f}, "
            f"/goal {mean(per) / GOAL:.2f} (<= 1)"
        )
    print(
        f"{got['malls']:,} malls, {got['resources']:,} resources; fast path types "
        f"{got['fast'] or 'none'}; poll cycle {got['cycle']:,} requests; "
        f"{got['missing']} creations not in the mirror"
    )


if __name__ == "__main__":
    asyncio.run(main())
