"""Issue #47's cost figures side by side, in one run (`bench/upstream_cost.py --side-by-side`).

1. Idle requests an hour where the mall routes are the source of `malls_deals` (the emulator's
   `deals_without_stores`), at 40, 200 and 1,000 malls: `bench/route_cost.py` in this process
   (one deal edit, then the daemon's deals poll `--polls` times back to back), and with
   `--before <tree>` the same script against that tree's code in a subprocess
   (`PYTHONPATH=<tree>`). The hour is extrapolated: the first poll plus the mean of the
   others times 59.
2. Requests per mall-scoped creation at 1,000 malls on the per-mall path (the emulator not
   serving `GET /malls?include=`): `bench/creation_cost.py`, beside the goal of 10 (and with
   `--before`, against that tree too).
3. The rolling proof's share of the budget at 200,000 and 1,000,000 rows, beside the 15 %
   limit: `bench/proof_cost.py`'s arithmetic on the emulator's data set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import creation_cost
import proof_cost
import route_cost

from sync.core.logs import configure

HERE = Path(__file__).resolve().parent
ROUTE_MALLS = (40, 200, 1000)
#: Route requests an hour before #47 as route_cost.py's author measured them (extrapolated the
#: same way), for a run without `--before`.
QUOTED_BEFORE = {40: 1220, 200: 6100}
LAST_CREATION = 42.0  # requests per creation at 1,000 malls per mall, as issue #47 quotes it


def _against(tree: str, script: str, *args: str) -> list[dict[str, Any]]:
    """`script --json args` run against the code in `tree` (a subprocess): its JSON lines."""
    cmd = [sys.executable, str(HERE / script), "--json", *args]
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{script} against {tree} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _before(tree: str, resources: int, polls: int) -> dict[int, dict[str, Any]]:
    """route_cost.py's figures against the code in `tree`."""
    malls = ",".join(map(str, ROUTE_MALLS))
    rows = _against(
        tree,
        "route_cost.py",
        "--malls",
        malls,
        "--resources",
        str(resources),
        "--polls",
        str(polls),
    )
    return {int(r["malls"]): r for r in rows}


def _seq(values: list[int]) -> str:
    if len(values) > 5 and len(set(values)) == 1:
        return f"{values[0]:,} each of {len(values)}"
    return ", ".join(f"{v:,}" for v in values)


async def run(args: argparse.Namespace) -> None:
    """Measure and print the three parts (see the module docstring)."""
    configure("warning")
    res, polls = args.route_resources, args.polls
    print(
        "issue #47 cost side by side, one run, in process (emulator in this process, no "
        "latency, budget off; request counts, not time)"
    )
    print(
        f"\n1. idle requests per hour, mall routes the source of malls_deals "
        f"(emulator deals_without_stores), {res:,} resources; one deal edit, then the "
        f"daemon's deals poll {polls} times back to back (not a minute apart); per hour "
        f"EXTRAPOLATED = poll 1 + mean(polls 2-{polls}) x {route_cost.IDLE_POLLS_AN_HOUR}; "
        f"'all' is every request of those polls (the deals listings and the routes), not the "
        f"whole daemon's"
    )
    before = _before(args.before, res, polls) if args.before else {}
    print(
        f"{'malls':>6} {'code':<7} {'route req per poll (measured)':<32} "
        f"{'all req per poll (measured)':<32} {'route req/h':>11} {'all req/h':>10}"
    )
    ratios = []
    for malls in ROUTE_MALLS:
        now = await route_cost.measure(malls, res, polls)
        if now["left_in_malls"]:
            raise SystemExit(f"{malls} malls: the edited deal is still in malls_deals")
        rows = [("now", now)]
        if malls in before:
            rows.insert(0, (f"{args.before_label}", before[malls]))
        for label, r in rows:
            print(
                f"{malls:>6,} {label:<7} {_seq(r['routes']):<32} {_seq(r['total']):<32} "
                f"{route_cost.per_hour(r['routes']):>11,} {route_cost.per_hour(r['total']):>10,}"
            )
        new_h = route_cost.per_hour(now["routes"])
        if malls in before:
            old_h = route_cost.per_hour(before[malls]["routes"])
            ratios.append(
                f"{malls:,} malls {new_h:,}/{old_h:,} = {new_h / old_h:.2f}"
                if old_h
                else f"{malls:,} malls {new_h:,}/0"
            )
        elif malls in QUOTED_BEFORE:
            old_h = QUOTED_BEFORE[malls]
            ratios.append(f"{malls:,} malls {new_h:,}/{old_h:,} (quoted) = {new_h / old_h:.2f}")
        else:
            ratios.append(f"{malls:,} malls: before not measured (no --before)")
    print(f"ratio route req/h now/before: {'; '.join(ratios)}")

    c = await creation_cost.measure(args.creation_malls, args.creation_resources, args.creations)
    goal = creation_cost.GOAL
    print(
        f"\n2. requests per mall-scoped creation, per-mall path (GET /malls?include= not "
        f"served; fast path types: {c['fast'] or 'none'}), {c['malls']:,} malls, "
        f"{c['resources']:,} resources; a creation's update notice drained by the queue "
        f"worker, nothing else running (measured; the first poll cycle, detection included, "
        f"{c['cycle']:,} requests)"
    )
    runs = [("now", c)]
    if args.before:
        old = _against(
            args.before,
            "creation_cost.py",
            *("--malls", str(args.creation_malls), "--resources", str(args.creation_resources)),
            *("--creations", str(args.creations)),
        )[0]
        runs.insert(0, (args.before_label, old))
    print(
        f"{'code':<7} {'creation in':<27} {'requests per creation (measured)':<34} "
        f"{'mean':>7} {'/goal':>6}"
    )
    for label, got in runs:
        for where, per in (
            ("a random mall", got["cold"]),
            ("a mall a notice just named", got["hot"]),
        ):
            m = creation_cost.mean(per)
            print(f"{label:<7} {where:<27} {_seq(per):<34} {m:>7,.1f} {m / goal:>6.2f}")
    print(
        f"goal {goal:g} per creation (ratio <= 1); last measured {LAST_CREATION:g} (as issue "
        f"#47 quotes it: a daemon run); creations not in the mirror: "
        + ", ".join(f"{label} {got['missing']}" for label, got in runs)
    )

    print(
        f"\n3. the rolling proof's share of the budget (bench/proof_cost.py arithmetic on the "
        f"emulator's data set; staleness_bound {proof_cost.BOUND:g} s, budget "
        f"{proof_cost.BUDGET:g}/s = {proof_cost.BUDGET * 3600:,.0f} requests/h), "
        f"{args.creation_malls:,} malls"
    )
    print(
        f"{'resources':>10} {'mall-scoped path':<20} {'proof req/h':>11} {'share':>6} "
        f"{'limit':>6} {'share/limit':>11}"
    )
    base = proof_cost.shape_of(args.proof_resources, args.creation_malls)
    for k in (1, 5):
        shape = base.scaled(k) if k > 1 else base
        for fast in (True, False):
            got = proof_cost.costs(shape, fast=fast)
            path = "GET /malls?include=" if fast else "per mall"
            print(
                f"{args.proof_resources * k:>10,} {path:<20} {got['proof_h']:>11,.0f} "
                f"{got['proof_share']:>6.1%} {proof_cost.GOAL_SHARE:>6.0%} "
                f"{got['proof_share'] / proof_cost.GOAL_SHARE:>11.2f}"
            )
