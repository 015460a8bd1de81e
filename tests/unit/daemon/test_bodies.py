"""sync.daemon.bodies: types isolated in a job, the poll cycle's cost, the verify's credit."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sync.core.errors import ForbiddenError, SyncError, UpstreamError
from sync.daemon.bodies import Bodies
from sync.daemon.state import SyncState
from sync.jobs.evidence import Evidence
from sync.jobs.proving.verify import VerifyReport
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.store import Mirror

T = catalogue.TYPES


class FakePoller:
    """Polls by the script given: the rows changed per type, or the error it raises."""

    def __init__(self, outcomes: dict[str, int | Exception]) -> None:
        self.outcomes = outcomes
        self.polled: list[tuple[str, list[int], int]] = []

    async def poll_type(self, rtype: Any, malls: list[int], concurrency: int) -> int:
        self.polled.append((rtype.name, malls, concurrency))
        outcome = self.outcomes[rtype.name]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class NoMembers:
    """The mall-include fast path, never taken."""

    detected = 0

    async def detect(self) -> None:
        self.detected += 1

    def fast(self) -> list[Any]:
        return []

    def pages(self) -> int:
        return 0


class FakeVerifier:
    def __init__(self, cost: int) -> None:
        self._cost = cost
        self.steps: list[int] = []

    def cost(self, types: Any, malls: Any) -> int:
        return self._cost

    async def step(self, types: Any, malls: Any, requests: int) -> VerifyReport:
        self.steps.append(requests)
        return VerifyReport(rows=requests, requests=requests)


def _bodies(mirror: Mirror, types: list[Any], malls: list[int], **parts: Any) -> Bodies:
    settings = SimpleNamespace(
        upstream=SimpleNamespace(concurrency=2, max_requests_per_second=4.0),
        schedule=SimpleNamespace(poll_interval=60.0, verify_interval=6000.0),
        mirror=SimpleNamespace(changes_retention_days=7.0),
    )
    running: Any = SimpleNamespace(
        settings=settings,
        types=types,
        client=None,
        mirror=mirror,
        evidence=Evidence(None, mirror),  # no tie to settle: never asks
        state=SyncState(types),
        faults=TypeFaults(clock=lambda: 0.0),
        poller=parts.get("poller"),
        verifier=parts.get("verifier"),
        proof=None,
        members=NoMembers(),
        malls=lambda: malls,
    )
    return Bodies(running, subscriptions=parts.get("subscriptions"))  # type: ignore[arg-type]


def _type_row(mirror: Mirror, name: str) -> tuple[Any, Any]:
    return mirror.conn.execute(
        "SELECT last_sync_at, last_error FROM _sync_types WHERE type = ?", (name,)
    ).fetchone()


async def test_a_failing_type_backs_off_while_the_others_poll_and_the_run_names_it(
    mirror: Mirror,
) -> None:
    poller = FakePoller(
        {"articles": UpstreamError("HTTP 502 from /articles", status=502), "events": 3}
    )
    bodies = _bodies(mirror, [T["articles"], T["events"], T["tags"]], [7], poller=poller)
    with pytest.raises(SyncError) as caught:
        await bodies.poll_all()
    assert str(caught.value) == (
        "articles failing; the other types went on: articles: HTTP 502 from /articles"
    )
    assert sorted(p[0] for p in poller.polled) == ["articles", "events"]  # tags: no updated_at
    assert bodies.members.detected == 1 and bodies.members_detected
    assert "events" in bodies.state.last_ok and "articles" not in bodies.state.last_ok
    assert bodies.faults.failing["articles"].failures == 1
    assert _type_row(mirror, "articles")[1] == "HTTP 502 from /articles"
    assert _type_row(mirror, "events")[0] is not None and _type_row(mirror, "events")[1] is None
    poller.polled.clear()
    with pytest.raises(SyncError):  # still failing: the run names it again
        await bodies.poll_all()  # backing off (the clock stands still): articles not asked
    assert [p[0] for p in poller.polled] == ["events"]


async def test_a_forbidden_type_is_skipped_not_failed(mirror: Mirror) -> None:
    poller = FakePoller({"articles": ForbiddenError("channel editorial not granted", status=403)})
    bodies = _bodies(mirror, [T["articles"]], [], poller=poller)
    bodies.state.last_ok["articles"] = 1.0
    await bodies.poll_all()  # no error: a 403 is no failure
    assert bodies.faults.failing == {} and "articles" not in bodies.state.last_ok
    assert _type_row(mirror, "articles")[1] == (
        "not readable by this account (403); skipped: channel editorial not granted"
    )


def test_a_poll_cycle_costs_one_request_per_scope_and_one_for_the_feed(mirror: Mirror) -> None:
    # deals: 3 visibilities; stores: one per mall (2); tags: not polled; feed: 1.
    bodies = _bodies(mirror, [T["deals"], T["stores"], T["tags"]], [1, 2])
    assert bodies.poll_cycle() == {
        "requests": 6,
        "seconds_at_budget": 1.5,
        "staleness_bound_s": 61.5,
    }


async def test_the_verify_saves_its_credit_until_a_whole_request_is_due(mirror: Mirror) -> None:
    # A cycle of 50 requests over 6000 s, a tick every 60 s: half a request per tick.
    verifier = FakeVerifier(cost=50)
    bodies = _bodies(mirror, [T["deals"]], [], verifier=verifier)
    await bodies.verify_step()
    assert verifier.steps == [] and bodies.verify_credit == 0.5
    await bodies.verify_step()
    assert verifier.steps == [1] and bodies.verify_credit == 0.0


def test_subscriptions_are_recorded_sorted_for_status(mirror: Mirror) -> None:
    subscriptions = SimpleNamespace(topics={"stores", "deals"})
    _bodies(mirror, [], [], subscriptions=subscriptions).record_subscriptions()
    meta = dict(mirror.conn.execute("SELECT key, value FROM _sync_meta WHERE key LIKE 'webhook_%'"))
    assert meta["webhook_topics"] == "deals,stores" and meta["webhook_topics_checked_at"]
