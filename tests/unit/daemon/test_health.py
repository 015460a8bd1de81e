"""sync.daemon.health: the /healthz verdict and the scrape's gauges, by an injected clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from sync.channel.client import ChannelClient
from sync.core.errors import StorageFault
from sync.daemon import health as health_module
from sync.daemon.health import Gauges, Health
from sync.daemon.http import make_app
from sync.daemon.state import SyncState
from sync.ingest.receiver import Answer
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.store import Mirror
from sync.store.queue import ChangeQueue
from sync.store.watch import StorageWatch

MONO = 10_000.0  # the monotonic clock "now"
NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC).timestamp()
TYPES = [catalogue.TYPES["deals"], catalogue.TYPES["stores"]]


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        health_module, "time", SimpleNamespace(monotonic=lambda: MONO, time=lambda: NOW)
    )


def _client(unreachable: str | None = None, statuses: dict[int, int] | None = None) -> Any:
    budget = SimpleNamespace(snapshot=lambda: {"max_rate": 2.0})
    session = SimpleNamespace(
        unreachable=unreachable,
        budget=budget,
        stats=SimpleNamespace(statuses=statuses or {}),
    )
    client = SimpleNamespace(session=session, stats=session.stats)
    client.budget_snapshot = lambda: ChannelClient.budget_snapshot(client)
    return client


def _state(started: float, **last_ok: float) -> SyncState:
    state = SyncState(TYPES)
    state.started = started
    state.last_ok.update(last_ok)
    return state


def _health(mirror: Mirror, tmp_path: Path, state: SyncState, client: Any = None) -> Health:
    return Health(
        state,
        mirror=mirror,
        client=client or _client(),
        queue=ChangeQueue(mirror.conn),
        poll_interval=60.0,  # stale after max(3 * 60, 300) = 300 s
        faults=TypeFaults(clock=lambda: MONO),
        storage=StorageWatch(tmp_path / "m.db"),
    )


def test_a_daemon_is_starting_until_ready_then_stale_past_its_bound(
    mirror: Mirror, tmp_path: Path
) -> None:
    state = _state(MONO - 1000.0, deals=MONO - 301.0, stores=MONO - 10.0)
    health = _health(mirror, tmp_path, state)
    report = health.report()
    assert report["status"] == "starting" and report["ready"] is False
    assert report["uptime_s"] == 1000.0 and report["stale_types"] == ["deals"]
    assert health.healthy()  # starting is alive
    state.ready = True
    report = health.report()
    assert report["status"] == "stale" and report["last_sync_age_s"] == {
        "deals": 301.0,
        "stores": 10.0,
    }
    assert not health.healthy()
    state.last_ok["deals"] = MONO - 300.0  # exactly the bound: not stale yet
    assert health.report()["status"] == "ok" and health.report()["problems"] == []


def test_a_young_daemon_is_warming_up_not_stale(mirror: Mirror, tmp_path: Path) -> None:
    state = _state(MONO - 299.0, deals=MONO - 400.0)  # a clock older than the process: warming
    state.ready = True
    assert _health(mirror, tmp_path, state).report()["status"] == "ok"


def test_a_failed_first_backfill_degrades_the_starting_daemon_and_says_why(
    mirror: Mirror, tmp_path: Path
) -> None:
    state = _state(MONO - 10.0)
    health = _health(mirror, tmp_path, state, _client(unreachable="unreachable: fix base_url"))
    state.backfill_failed = "the first backfill failed (1 in a row): 503; asked again 2 s after"
    report = health.report()
    assert report["status"] == "degraded" and report["ready"] is False
    assert report["problems"][:2] == [state.backfill_failed, "unreachable: fix base_url"]
    assert health.healthy()  # alive and retrying: a restart would not cure an outage
    state.backfill_failed = None
    assert health.report()["status"] == "starting"


def test_problems_degrade_a_ready_daemon_and_storage_comes_first(
    mirror: Mirror, tmp_path: Path
) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_jobs (name, outcome, error) VALUES ('poll', 'error', 'HTTP 500')"
    )
    state = _state(MONO - 1000.0, deals=MONO - 5.0)
    state.ready = True
    health = _health(mirror, tmp_path, state, _client(unreachable="upstream unreachable: refused"))
    health.faults.failed("stores", "HTTP 502")
    report = health.report()
    assert report["status"] == "degraded" and health.healthy()
    assert report["problems"] == [
        "upstream unreachable: refused",
        "poll error: HTTP 500",
        "stores failing (1 in a row, next try in 2 s): HTTP 502",
    ]
    assert report["reason"] is None and report["queue_depth"] == 0
    health.storage.fault = StorageFault("disk_full", "m.db", "No space left", "free space")
    health.storage.since = "2026-01-01T00:00:00.000Z"
    report = health.report()
    assert report["status"] == "degraded" and report["reason"] == "disk_full"
    assert report["problems"][0].startswith("storage disk_full since 2026-01-01T00:00:00.000Z: ")


class _NoWebhooks:
    limit = 16

    def reject(self, status: int, reason: str, path: str, peer: str | None) -> Answer:
        return Answer(status, reason)


@pytest.fixture
async def served(
    mirror: Mirror, tmp_path: Path
) -> AsyncIterator[tuple[SyncState, TestClient[Any, Any]]]:
    state = _state(MONO - 1000.0, deals=MONO - 1000.0)
    state.ready = True
    health = _health(mirror, tmp_path, state)
    app = make_app(_NoWebhooks(), health=health.report)  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield state, client


async def test_healthz_serves_the_report_503_while_stale(
    served: tuple[SyncState, TestClient[Any, Any]],
) -> None:
    state, client = served
    resp = await client.get("/healthz")
    body = await resp.json()
    assert resp.status == 503 and body["status"] == "stale" and body["stale_types"] == ["deals"]
    state.last_ok["deals"] = MONO  # synced just now, by the injected clock
    resp = await client.get("/healthz")
    assert resp.status == 200 and (await resp.json())["last_sync_age_s"] == {"deals": 0.0}


def test_gauges_age_each_type_by_this_process_else_the_mirror_else_the_process(
    mirror: Mirror,
) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_types (type, last_sync_at) VALUES ('stores', '2026-01-01T00:00:00.000Z')"
    )
    state = _state(MONO - 50.0, deals=MONO - 2.5)
    gauges = Gauges(state, mirror, _client(statuses={200: 3, 429: 1}), ChangeQueue(mirror.conn))
    assert gauges.lag_seconds() == {"deals": 2.5, "stores": 600.0}
    gauges.types = [*TYPES, catalogue.TYPES["malls"]]
    assert gauges.lag_seconds()["malls"] == 50.0  # never synced: as old as the process
    assert gauges.budget() == {"max_rate": 2.0}
    assert gauges.upstream_statuses() == {200: 3, 429: 1} and gauges.queue_depth() == 0


def test_gauges_age_the_proof_and_count_what_it_left_unresolved(mirror: Mirror) -> None:
    proven = {
        "deals": {"proven_at": "2026-01-01T00:09:00.000Z", "unresolved": 3},
        "stores": {"proven_at": None},
    }
    mirror.conn.execute(
        "INSERT INTO _sync_meta (key, value) VALUES ('proof_proven', ?)", (json.dumps(proven),)
    )
    gauges = Gauges(_state(MONO - 70.0), mirror, _client(), ChangeQueue(mirror.conn))
    assert gauges.proof() == ({"deals": 60.0, "stores": 70.0}, {"deals": 3, "stores": 0})
    gauges.client.session.budget = None
    assert gauges.budget() == {}
