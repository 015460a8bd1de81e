"""What the rolling proof costs the upstream with the default bound, beside the polls and the verify.

The proof's cycle is arithmetic on the data set's shape (`sync.jobs.proving.pacing`): a sparse listing
page per 100 rows of each scope (each top-level type, deals once per visibility), the
mall-scoped types in one walk of `GET /malls?include=` pages (100 malls a request; per mall and
type without it), once per `staleness_bound` (3,600 s). Beside it, with the shipped defaults:
the polls (a cycle with nothing changed every 60 s: `11 + ceil(malls / 100)` on the fast path,
`11 + 5 x malls` per mall, docs/cost.md) and the rolling verify (a `filter[id]` request per 100
rows of each scope, once per 7 days). The shape is the emulator's data set at 200,000 resources
(built in-process, not served); 1,000,000 scales each count by 5 (the same mix, the same malls).

Run:  .venv/bin/python bench/proof_cost.py [--malls 1000] [--resources 200000]
      (also printed by bench/upstream_cost.py --proof-only)
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from sync.emulator import Emulator
from sync.jobs.proving.pacing import cycle_cost, keepable_bound
from sync.model import catalogue

BUDGET = 20.0  # the shipped [upstream] max_requests_per_second
BOUND = 3600.0  # the shipped [schedule] staleness_bound
VERIFY = 604800.0  # the shipped [schedule] verify_interval
POLL = 60.0  # the shipped [schedule] poll_interval
GOAL_SHARE = 0.15


@dataclass
class Shape:
    """Rows per scope of the default mirrored types: top-level scopes, and per mall."""

    top: list[int]
    per_mall: dict[str, list[int]]
    malls: int

    def scaled(self, k: int) -> Shape:
        return Shape(
            [n * k for n in self.top],
            {name: [n * k for n in rows] for name, rows in self.per_mall.items()},
            self.malls,
        )

    @property
    def rows(self) -> int:
        return sum(self.top) + sum(sum(r) for r in self.per_mall.values())


def shape_of(resources: int, malls: int, seed: int = 1) -> Shape:
    """The emulator's data set: rows per scope as a full mirror of the default types holds them."""
    emu = Emulator(resources=resources, seed=seed, malls=malls)
    top: list[int] = []
    per_mall: dict[str, list[int]] = {}
    mall_ids = [int(m) for m in emu.ids("malls")]
    for rtype in catalogue.resolve(catalogue.LISTABLE):
        if rtype.level == "mall":
            per_mall[rtype.name] = [len(emu.ids(rtype.name, mall_id=m)) for m in mall_ids]
        elif rtype.name == "deals":
            top += [len(emu.ids("deals", visibility=v)) for v in ("Public", "Unlisted", "Private")]
        else:
            top.append(len(emu.ids(rtype.name)))
    return Shape(top, per_mall, len(mall_ids))


def costs(shape: Shape, *, fast: bool) -> dict[str, float]:
    """Requests per hour of the proof, the polls and the verify, and the proof's budget share."""
    walk = math.ceil(shape.malls / 100)
    per_mall = [n for rows in shape.per_mall.values() for n in rows]
    proof = cycle_cost(shape.top) + (walk if fast else cycle_cost(per_mall))
    poll_cycle = 11 + (walk if fast else 5 * shape.malls)
    verify = cycle_cost(shape.top) + cycle_cost(per_mall)
    budget_hour = BUDGET * 3600
    keep = keepable_bound(proof, BUDGET, BOUND)
    return {
        "proof_h": proof * 3600 / BOUND,
        "proof_share": proof * 3600 / BOUND / budget_hour,
        "poll_h": poll_cycle * 3600 / POLL,
        "verify_h": verify * 3600 / VERIFY,
        "keepable_s": float(keep["keepable_s"]),
    }


def table(resources: int = 200_000, malls: int = 1000) -> list[str]:
    """The lines the benchmark prints (200k as built, 1M as 5 x its counts)."""
    base = shape_of(resources, malls)
    out = [
        f"proof cost, default staleness_bound {BOUND:.0f} s, budget {BUDGET:g}/s "
        f"({BUDGET * 3600:,.0f} requests/h), {malls:,} malls",
        f"{'resources':>10} {'mall-scoped path':<20} {'proof req/h':>11} {'share':>6} "
        f"{'poll req/h':>10} {'verify req/h':>12} {'bound it can keep':>17}",
    ]
    for label, shape in ((resources, base), (resources * 5, base.scaled(5))):
        for fast in (True, False):
            c = costs(shape, fast=fast)
            path = "GET /malls?include=" if fast else "per mall"
            ok = "" if not fast else ("  (<= 15 %)" if c["proof_share"] <= GOAL_SHARE else "  (!)")
            out.append(
                f"{label:>10,} {path:<20} {c['proof_h']:>11,.0f} {c['proof_share']:>6.1%} "
                f"{c['poll_h']:>10,.0f} {c['verify_h']:>12,.0f} {c['keepable_s']:>15,.0f} s{ok}"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malls", type=int, default=1000)
    ap.add_argument("--resources", type=int, default=200_000)
    args = ap.parse_args()
    print("\n".join(table(args.resources, args.malls)))


if __name__ == "__main__":
    main()
