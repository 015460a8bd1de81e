"""What the mall routes cost where they are the source of `malls_deals` (#47), measured in process.

For each mall count: the emulator (in this process, no latency, `deals_without_stores`, so
`malls_deals` is listed from `GET /malls/{id}/deals`) serves `--resources` resources; a mirror
is backfilled (stores and deals, budget off); the daemon's own parts are opened on it
(`sync.daemon.running.open_running`, the job bodies `sync.daemon.bodies.Bodies`); one deal is
made Private (it leaves every mall's route), then the daemon's poll body for deals
(`Bodies.poll_type`) runs `--polls` times back to back (seconds apart, not a minute), and this
prints the `/malls/{id}/deals` requests each poll made, every request of those polls, and the
route requests an hour at one deal edit an hour, extrapolated: the first poll, plus the mean of
the polls after it times 59 (the idle polls of the rest of the hour at one poll a minute). At
the end the edited deal must be in no mall's `malls_deals` in the mirror.

The same measurement runs against older code with `PYTHONPATH=<its tree>` (`--json` prints
the figures for `bench/upstream_cost.py --side-by-side --before <tree>`).

Run:  PYTHONPATH=. .venv/bin/python bench/route_cost.py [--malls 40,200] [--resources 2000]
Bounded: about 10 s at 40 malls, a minute at 200 and a few at 1,000 on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from _inprocess import backfilled

from sync.core.logs import configure
from sync.daemon.bodies import Bodies
from sync.emulator import Emulator
from sync.emulator.hard import Hard
from sync.model import catalogue

ROUTE = "/malls/{id}/deals"
#: Polls a minute apart in an hour after the one that follows the edit.
IDLE_POLLS_AN_HOUR = 59


def per_hour(per_poll: list[int]) -> int:
    """Requests an hour at one edit an hour: the first poll, then the idle polls' mean x 59."""
    idle = per_poll[1:] or [0]
    return per_poll[0] + round(sum(idle) / len(idle) * IDLE_POLLS_AN_HOUR)


async def measure(malls: int, resources: int, polls: int) -> dict[str, Any]:
    """Route requests and all requests per deals poll after one deal edit, at `malls` malls."""
    emu = Emulator(resources=resources, seed=23, malls=malls, hard=Hard(deals_without_stores=True))
    async with emu.serve(port=0):
        async with backfilled(emu, types=["stores", "deals"]) as (running, backfill_s):
            listed = [x for x in emu.ids("deals", visibility="Public") if emu.malls_of("deals", x)]
            edited = listed[0]
            emu.update("deals", edited, {"visibility": "Private"})
            bodies = Bodies(running, subscriptions=None)  # type: ignore[arg-type]
            routes: list[int] = []
            total: list[int] = []
            seconds: list[float] = []
            for _ in range(polls):
                r0, n0, t0 = emu.requests.routes[ROUTE], emu.requests.total, time.monotonic()
                await bodies.poll_type(catalogue.TYPES["deals"])
                routes.append(emu.requests.routes[ROUTE] - r0)
                total.append(emu.requests.total - n0)
                seconds.append(time.monotonic() - t0)
            left = running.mirror.conn.execute(
                "SELECT COUNT(*) FROM malls_deals WHERE deals_id = ?", (edited,)
            ).fetchone()[0]
    return {
        "malls": malls,
        "resources": resources,
        "routes": routes,
        "total": total,
        "seconds": seconds,
        "backfill_s": backfill_s,
        "left_in_malls": int(left),
        "deal_malls": len(emu.malls_of("deals", edited)),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malls", default="40,200", help="comma-separated mall counts")
    ap.add_argument("--resources", type=int, default=2000)
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="one JSON line per mall count")
    args = ap.parse_args()
    configure("warning")
    if not args.json:
        print(f"{'malls':>6} {'route requests per poll after one deal edit':<44} {'per hour':>9}")
    for malls in [int(m) for m in args.malls.split(",")]:
        got = await measure(malls, args.resources, args.polls)
        if args.json:
            print(json.dumps(got), flush=True)
            continue
        per_poll = got["routes"]
        print(f"{malls:>6,} {', '.join(map(str, per_poll)):<44} {per_hour(per_poll):>9,}")


if __name__ == "__main__":
    asyncio.run(main())
