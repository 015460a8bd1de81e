"""What the mall routes cost where they are the source of `malls_deals` (#47), measured in process.

For each mall count: the emulator (in this process, no latency, `deals_without_stores`, so
`malls_deals` is listed from `GET /malls/{id}/deals`) serves `--resources` resources; a mirror
is backfilled (stores and deals, budget off); one deal is made Private (it leaves every mall's
route), then the daemon's poll body for deals (`Bodies.poll_type`) runs `--polls` times, a
"minute" each, and this prints the `/malls/{id}/deals` requests each poll made, and the route
requests an hour at one deal edit an hour (the polls after the first are what an idle hour
repeats: 60 polls). The mirror is compared with the emulator at the end.

Run:  PYTHONPATH=. .venv/bin/python bench/route_cost.py [--malls 40,200] [--resources 2000]
Bounded: about 10 s at 40 malls and a minute at 200 on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sync.channel.client import ChannelClient
from sync.core.config import parse_config
from sync.daemon.bodies import Bodies
from sync.daemon.state import SyncState
from sync.emulator import Emulator
from sync.emulator.hard import Hard
from sync.jobs.backfill import Backfill
from sync.jobs.fetch import Fetcher
from sync.jobs.poll import Poller
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.store import Mirror

ROUTE = "/malls/{id}/deals"


async def one(malls: int, resources: int, polls: int) -> list[int]:
    """Route requests per poll after one deal edit, at `malls` malls."""
    emu = Emulator(resources=resources, seed=23, malls=malls, hard=Hard(deals_without_stores=True))
    async with emu.serve(port=0):
        db = Path(tempfile.mkdtemp()) / "m.db"
        settings = parse_config(
            {
                "upstream": {
                    "base_url": emu.base_url,
                    "email": emu.email,
                    "password": emu.password,
                    "types": ["stores", "deals"],
                    "max_requests_per_second": 0,
                },
                "mirror": {"path": str(db)},
            }
        )
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            await Backfill(client, mirror, settings).run()
            listed = [d for d in emu.ids("deals", visibility="Public") if emu.malls_of("deals", d)]
            emu.update("deals", listed[0], {"visibility": "Private"})
            types = [catalogue.TYPES["stores"], catalogue.TYPES["deals"]]
            running: Any = SimpleNamespace(
                settings=settings,
                types=types,
                client=client,
                mirror=mirror,
                fetcher=Fetcher(client, mirror),
                state=SyncState(types),
                faults=TypeFaults(),
                poller=Poller(
                    client,
                    mirror,
                    page_size=settings.upstream.page_size,
                    overlap=settings.schedule.poll_overlap,
                    lookback_max=settings.schedule.poll_lookback_max,
                ),
                verifier=None,
                proof=None,
                members=None,
                malls=lambda: sorted(mirror.table("malls").ids()),
            )
            bodies = Bodies(running, subscriptions=None)  # type: ignore[arg-type]
            out = []
            for _ in range(polls):
                before = emu.requests.routes[ROUTE]
                await bodies.poll_type(catalogue.TYPES["deals"])
                out.append(emu.requests.routes[ROUTE] - before)
        mirror.close()
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malls", default="40,200", help="comma-separated mall counts")
    ap.add_argument("--resources", type=int, default=2000)
    ap.add_argument("--polls", type=int, default=5)
    args = ap.parse_args()
    print(f"{'malls':>6} {'route requests per poll after one deal edit':<44} {'per hour':>9}")
    for malls in [int(m) for m in args.malls.split(",")]:
        per_poll = await one(malls, args.resources, args.polls)
        idle = per_poll[1:] or [0]
        hour = per_poll[0] + round(sum(idle) / len(idle) * 59)
        print(f"{malls:>6,} {', '.join(map(str, per_poll)):<44} {hour:>9,}")


if __name__ == "__main__":
    asyncio.run(main())
