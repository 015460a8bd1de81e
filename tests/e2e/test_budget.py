"""The request budget: never more than the rate in any 1-second window, priorities first, a
429 slows it down and it recovers (on a fake clock: no timing assertions)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from sync.channel.budget import MIN_RATE, Priority, RequestBudget, priority
from tests.support.clock import FakeClock


def windows_ok(starts: list[float], rate: float) -> bool:
    """No sliding 1-second window holds more than `rate` starts."""
    starts = sorted(starts)
    j = 0
    for i, t in enumerate(starts):
        while starts[j] <= t - 1.0:
            j += 1
        if i - j + 1 > rate:
            return False
    return True


async def test_a_burst_of_10000_never_exceeds_the_budget() -> None:
    clock = FakeClock()
    starts: list[float] = []
    budget = RequestBudget(
        50.0, clock=clock, sleep=clock.sleep, on_grant=lambda t, _: starts.append(t)
    )

    await asyncio.gather(*(budget.acquire(Priority(i % 4)) for i in range(10_000)))
    assert len(starts) == 10_000
    assert windows_ok(starts, 50)
    assert max(starts) - min(starts) >= 10_000 / 50 - 1  # and it does not crawl either
    await budget.close()


async def test_starts_are_spread_over_the_second_not_sent_in_one_burst() -> None:
    """An upstream counting per clock second must not see a whole window's worth at once
    (two such bursts either side of its second boundary would land in one of its seconds)."""
    clock = FakeClock()
    starts: list[float] = []
    budget = RequestBudget(
        20.0, clock=clock, sleep=clock.sleep, on_grant=lambda t, _: starts.append(t)
    )
    await asyncio.gather(*(budget.acquire() for _ in range(400)))
    assert windows_ok(starts, 20)
    for t in starts:  # any 250 ms holds at most the burst (2) plus 250 ms at 20/s
        assert sum(1 for u in starts if t <= u < t + 0.25) <= 2 + 5
    await budget.close()


async def test_a_webhook_fetch_goes_before_every_waiting_poll() -> None:
    clock = FakeClock()
    order: list[Priority] = []
    budget = RequestBudget(5.0, clock=clock, sleep=clock.sleep)
    asked_at: list[int] = []

    async def request(level: Priority) -> None:
        with priority(level):
            if level == Priority.WEBHOOK:
                asked_at.append(len(order))  # grants made before the webhook fetch asked
            await budget.acquire()

    def on_grant(_: float, level: Priority) -> None:
        order.append(level)
        if len(order) == 12:  # mid-stream, a notice arrives
            tasks.append(asyncio.create_task(request(Priority.WEBHOOK)))

    budget.on_grant = on_grant
    tasks = [asyncio.create_task(request(Priority.POLL)) for _ in range(30)]
    while not all(t.done() for t in tasks):
        await asyncio.gather(*tasks)
    # Once it asked, at most one poll went before it (one already being granted then).
    assert order.index(Priority.WEBHOOK) <= asked_at[0] + 1
    assert order.count(Priority.POLL) == 30
    await budget.close()


async def test_places_in_flight_are_granted_with_the_rate_in_priority_order() -> None:
    """With `concurrency`, a grant is also a place in flight: a request is sent as granted,
    never granted and then queued for a connection, and a webhook fetch still goes first."""
    clock = FakeClock()
    order: list[Priority] = []
    budget = RequestBudget(
        1000.0, clock=clock, sleep=clock.sleep, concurrency=2, on_grant=lambda _, p: order.append(p)
    )
    release = asyncio.Event()
    in_flight: list[int] = []

    async def request(level: Priority) -> None:
        async with budget.slot(level):
            in_flight.append(budget.in_flight)
            await release.wait()

    holders = [asyncio.create_task(request(Priority.POLL)) for _ in range(2)]
    await asyncio.sleep(0)
    polls = [asyncio.create_task(request(Priority.POLL)) for _ in range(10)]
    await asyncio.sleep(0)
    webhook = asyncio.create_task(request(Priority.WEBHOOK))
    await asyncio.sleep(0)
    assert budget.in_flight == 2 and len(order) == 2  # the other 11 wait for a place
    release.set()
    await asyncio.gather(*holders, *polls, webhook)
    assert order[2] == Priority.WEBHOOK  # the first place freed went to it
    assert max(in_flight) <= 2 and budget.in_flight == 0
    await budget.close()


async def test_a_429_storm_slows_the_budget_and_it_recovers() -> None:
    clock = FakeClock()
    budget = RequestBudget(20.0, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        budget.on_throttled(None)
    assert budget.rate == MIN_RATE
    budget.on_throttled(3.0)
    t0 = clock()
    await budget.acquire()
    assert clock() >= t0 + 3.0  # Retry-After obeyed
    starts = []
    for _ in range(5):
        await budget.acquire()
        starts.append(clock())
    assert all(b - a >= 1 / MIN_RATE - 1e-9 for a, b in itertools.pairwise(starts))
    for _ in range(60):  # a minute of ordinary answers
        clock.t += 1.0
        budget.on_answer()
    assert budget.rate == 20.0
    await budget.close()


async def test_a_429_storm_upstream_slows_a_backfill_which_still_mirrors_exactly(
    make_emulator: Any, tmp_path: Path
) -> None:
    from sync.channel.client import ChannelClient
    from sync.jobs.backfilling.backfill import Backfill
    from sync.store import Mirror
    from tests.support.compare import compare
    from tests.support.settings import settings_for

    async with make_emulator(resources=300, seed=2) as emu:
        emu.faults.rate_429, emu.faults.retry_after = 0.3, 1
        db = tmp_path / "m.db"
        settings = settings_for(
            emu, db, types=["malls", "deals"], max_backoff=0.2, max_requests_per_second=40
        )
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            assert client.session.budget is not None
            snap = client.session.budget.snapshot()
        mirror.close()
        emu.faults.off()
        assert snap["throttled"] > 0 and snap["rate"] < 40  # it slowed down
        assert compare(db, emu, types=["malls", "deals"]).differences == 0


async def test_a_burst_of_10000_notices_keeps_the_daemon_within_its_budget(
    emulator: Any, tmp_path: Path
) -> None:
    """10,000 webhook notices at once (updates of known deals and stores, and ids the mirror
    does not hold, which send the worker looking in the malls): every request the daemon
    starts meanwhile stays within the budget in every sliding 1-second window."""
    import aiohttp
    import orjson

    from tests.support.daemon import running
    from tests.support.settings import SECRET
    from tests.support.settings import daemon_settings as settings_for
    from tests.support.waiting import eventually

    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True)
    async with running(settings) as daemon:
        budget = daemon.running.client.session.budget
        assert budget is not None and budget.max_rate == 20.0  # the shipped default
        grants: list[float] = []
        budget.on_grant = lambda t, _: grants.append(t)
        deals = emulator.ids("deals")
        stores = emulator.ids("stores")
        items = [
            {"type": "updates", "attributes": {"resource_type": t, "resource_id": int(rid)}}
            for i in range(8_000)
            for t, rid in [("deals", deals[i % len(deals)])]
        ] + [
            {"type": "updates", "attributes": {"resource_type": "stores", "resource_id": rid}}
            for rid in [*map(int, stores[:1000]), *range(10**8, 10**8 + 1000)]
        ]
        url = f"http://127.0.0.1:{daemon.bound_port}/webhooks/{SECRET}"
        async with aiohttp.ClientSession() as http:
            for start in range(0, len(items), 500):
                body = orjson.dumps({"data": items[start : start + 500]})
                async with http.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    assert resp.status in (200, 202, 204)
        # Queued durably before each 202: an empty queue means every notice was handled.
        await eventually(lambda: daemon.running.queue.depth() == 0, timeout=120)
    assert len(grants) > 20  # the burst made requests: fetches by id, the malls searched
    assert windows_ok(grants, 20)
