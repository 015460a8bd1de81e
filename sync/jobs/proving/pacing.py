"""The proof's pacing arithmetic: how often it ticks, what a tick may spend, what bound it can keep.

Pure maths (like `sync.daemon.schedule`), tested alone in `tests/unit/daemon/test_schedule.py`;
the daemon (`sync.daemon.bodies`) feeds it the cycle's cost and the configured bound, and `ccsync status`
(`sync.readers.status`) the recorded cost and the request budget.
"""

from __future__ import annotations

#: The proof's tick at most: each tick lists a share of every scope's pages, so that a cycle
#: over the whole mirror takes `staleness_bound` at a flat request rate.
PROOF_TICK = 60.0
#: The share of the request budget a proof may plan on. It runs at the lowest priority, so
#: whatever notices, polls and the feed need goes first; a bound needing more than this
#: share of the budget is reported as one it cannot keep.
PROOF_BUDGET_SHARE = 0.5
#: Ids (and rows of a sparse listing) per request: the spec's page maximum.
ROWS_PER_REQUEST = 100


def proof_tick(bound: float) -> float:
    """Seconds between two ticks of the proof: `PROOF_TICK`, shorter for a short bound so a
    cycle still takes about 20 ticks or more (never under a second)."""
    return min(PROOF_TICK, max(bound / 20, 1.0))


def proof_share(cost: int, bound: float) -> float:
    """Requests one tick earns so that a cycle costing `cost` requests takes `bound`; a tick
    spends whole requests and carries what it overspent or left to the next."""
    return cost * proof_tick(bound) / bound


def cycle_cost(scope_rows: list[int]) -> int:
    """Requests one cycle's listings take: one page per 100 rows of each scope, one at least."""
    return sum(max(1, -(-rows // ROWS_PER_REQUEST)) for rows in scope_rows)


def keepable_bound(cost: int, rate: float, bound: float) -> dict[str, float | bool]:
    """Whether a cycle of `cost` requests fits `bound` at `rate` requests a second (0: no
    budget, always fits) within `PROOF_BUDGET_SHARE`; the bound it can keep, and by how
    many seconds the configured one falls short."""
    if rate <= 0:
        return {"fits": True, "keepable_s": bound, "short_by_s": 0.0, "share": 0.0}
    keepable = cost / (rate * PROOF_BUDGET_SHARE)
    return {
        "fits": keepable <= bound,
        "keepable_s": round(max(keepable, 0.0), 1),
        "short_by_s": round(max(0.0, keepable - bound), 1),
        # The share of the whole budget the configured bound takes.
        "share": round(cost / (rate * bound), 4) if bound > 0 else 0.0,
    }
