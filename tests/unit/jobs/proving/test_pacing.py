"""`sync.jobs.proving.pacing`: the proof's tick, its share per tick and the bound a budget keeps, at
their edges."""

from __future__ import annotations

from sync.jobs.proving.pacing import (
    PROOF_BUDGET_SHARE,
    PROOF_TICK,
    cycle_cost,
    keepable_bound,
    proof_share,
    proof_tick,
)


def test_the_tick_is_a_twentieth_of_the_bound_between_one_second_and_a_minute() -> None:
    assert proof_tick(20 * PROOF_TICK) == PROOF_TICK
    assert proof_tick(20 * PROOF_TICK + 1) == PROOF_TICK
    assert proof_tick(100.0) == 5.0
    assert proof_tick(20.0) == 1.0
    assert proof_tick(0.5) == 1.0


def test_a_tick_earns_the_cost_times_its_share_of_the_bound() -> None:
    # A bound of 600 s ticks every 30 s: 1/20 of the cycle's 400 requests.
    assert proof_share(400, 600.0) == 20.0
    # A long bound ticks each minute: 60/7200 of 1,200 requests.
    assert proof_share(1_200, 7_200.0) == 10.0
    assert proof_share(0, 600.0) == 0.0


def test_an_empty_mirror_still_costs_a_request_per_scope() -> None:
    assert cycle_cost([]) == 0
    assert cycle_cost([0]) == 1
    assert cycle_cost([99, 200, 201]) == 1 + 2 + 3


def test_a_bound_exactly_at_the_budget_share_fits_and_a_zero_bound_takes_no_share() -> None:
    # 1,000 requests at 2 / s with half the budget: exactly 1,000 s.
    at_edge = keepable_bound(1_000, 2.0, 1_000.0)
    assert at_edge == {"fits": True, "keepable_s": 1000.0, "short_by_s": 0.0, "share": 0.5}
    assert PROOF_BUDGET_SHARE == 0.5
    assert keepable_bound(1_000, 2.0, 999.0)["fits"] is False
    assert keepable_bound(1_000, 2.0, 999.0)["short_by_s"] == 1.0
    assert keepable_bound(10, 1.0, 0.0)["share"] == 0.0
    assert keepable_bound(10, -1.0, 30.0) == {
        "fits": True,
        "keepable_s": 30.0,
        "short_by_s": 0.0,
        "share": 0.0,
    }
