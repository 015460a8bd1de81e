"""sync.channel.budget: the burst size, AIMD on 429s, priorities by context, slots in flight, snapshot."""

from __future__ import annotations

import pytest

from sync.channel.budget import (
    MIN_RATE,
    Priority,
    RequestBudget,
    current_priority,
    priority,
)
from tests.support.clock import FakeClock


def test_a_budget_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError, match=r"^a request budget needs a positive rate$"):
        RequestBudget(0)


@pytest.mark.parametrize(("rate", "burst"), [(0.5, 1.0), (20, 2.0), (25, 3.0), (100, 10.0)])
def test_the_burst_is_a_tenth_of_the_rate_at_least_one(rate: float, burst: float) -> None:
    assert RequestBudget(rate).burst == burst


def test_429s_halve_the_rate_down_to_the_floor_and_answers_bring_it_back() -> None:
    clock = FakeClock()
    budget = RequestBudget(1.0, clock=clock)
    budget.on_throttled(retry_after=7)
    assert (budget.rate, budget.hold_until, budget.throttled) == (0.5, 1007.0, 1)
    for _ in range(5):
        budget.on_throttled(None)
    assert budget.rate == MIN_RATE and budget.hold_until == 1007.0
    budget.on_answer()  # within a second of the last change: no growth yet
    assert budget.rate == MIN_RATE
    clock.t += 1.0
    budget.on_answer()
    assert budget.rate == pytest.approx(MIN_RATE + 0.05)
    budget.on_answer()  # once a second at most
    assert budget.rate == pytest.approx(MIN_RATE + 0.05)
    clock.t += 60
    for _ in range(40):
        clock.t += 1
        budget.on_answer()
    assert budget.rate == 1.0  # never above the configured rate


def test_priority_is_set_for_the_block_and_restored() -> None:
    assert current_priority.get() is Priority.POLL
    with priority(Priority.WEBHOOK):
        assert current_priority.get() is Priority.WEBHOOK
        with priority(Priority.PROOF):
            assert current_priority.get() is Priority.PROOF
        assert current_priority.get() is Priority.WEBHOOK
    assert current_priority.get() is Priority.POLL
    assert sorted(Priority) == [
        Priority.WEBHOOK,
        Priority.POLL,
        Priority.RECONCILE,
        Priority.HOURS,
        Priority.PROOF,
    ]


async def test_a_slot_holds_a_place_in_flight_at_the_tasks_priority() -> None:
    clock = FakeClock()
    grants: list[tuple[float, Priority]] = []
    budget = RequestBudget(
        20,
        clock=clock,
        sleep=clock.sleep,
        concurrency=2,
        on_grant=lambda t, p: grants.append((t, p)),
    )
    with priority(Priority.HOURS):
        async with budget.slot():
            assert budget.in_flight == 1
            async with budget.slot(Priority.WEBHOOK):
                assert budget.snapshot()["in_flight"] == 2
        assert budget.in_flight == 0
    budget.release()  # a release too many never goes below zero
    assert budget.in_flight == 0
    assert grants == [(1000.0, Priority.HOURS), (1000.0, Priority.WEBHOOK)]  # the burst of 2
    assert budget.snapshot() == {
        "max_rate": 20,
        "rate": 20,
        "waiting": 0,
        "in_flight": 0,
        "granted": 2,
        "throttled": 0,
        "waited_s": 0.0,
    }
    await budget.close()


async def test_past_the_burst_a_request_waits_its_turn_on_the_clock() -> None:
    clock = FakeClock()
    budget = RequestBudget(20, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await budget.acquire()
        budget.release()
    assert clock.t == pytest.approx(1000.05)  # the third waited one refill: 1 / 20 s
    assert budget.waited == pytest.approx(0.05)
    await budget.close()


async def test_the_proof_keeps_its_share_while_polls_keep_the_budget_busy() -> None:
    """60 poll requests and 5 proof requests waiting at once: the proof is not granted only
    after every poll (it would starve behind a poll that spends the whole budget), but one
    in `PROOF_EVERY` grants goes to it."""
    import asyncio

    from sync.channel.budget import PROOF_EVERY

    clock = FakeClock()
    grants: list[Priority] = []
    budget = RequestBudget(
        20, clock=clock, sleep=clock.sleep, on_grant=lambda t, p: grants.append(p)
    )

    async def one(level: Priority) -> None:
        await budget.acquire(level)
        budget.release()

    await asyncio.gather(
        *[one(Priority.POLL) for _ in range(60)], *[one(Priority.PROOF) for _ in range(5)]
    )
    first_proof = grants.index(Priority.PROOF)
    assert first_proof <= PROOF_EVERY + 2
    assert grants[: PROOF_EVERY * 3 + 3].count(Priority.PROOF) >= 3
    await budget.close()
