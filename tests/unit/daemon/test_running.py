"""sync.daemon.running: one `Running` built and closed in one place; the `Recorder`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from sync.core.config import parse_config
from sync.core.metrics import Metrics
from sync.daemon.running import Recorder, Running, open_running
from sync.daemon.state import SyncState
from sync.jobs.progress import NullProgress
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.store import Mirror
from sync.store.lock import holder_pid
from sync.store.repair import Repair
from sync.store.watch import StorageWatch


@asynccontextmanager
async def _running(db: Path, metrics: Metrics) -> AsyncIterator[Running]:
    settings = parse_config(
        {
            # Nothing listens there: building the parts sends no request.
            "upstream": {"base_url": "http://127.0.0.1:9", "email": "a@b.c", "password": "pw"},
            "mirror": {"path": str(db)},
        }
    )
    async with open_running(
        settings,
        state=SyncState([catalogue.TYPES["deals"], catalogue.TYPES["stores"]]),
        metrics=metrics,
        faults=TypeFaults(),
        storage=StorageWatch(db),
        progress=NullProgress(),
        stop=asyncio.Event(),
    ) as running:
        yield running


async def test_every_part_shares_the_one_mirror_client_and_fetcher(tmp_path: Path) -> None:
    metrics = Metrics()
    async with _running(tmp_path / "m.db", metrics) as r:
        assert r.types == [catalogue.TYPES["deals"], catalogue.TYPES["stores"]]
        assert r.evidence is r.reconciler.evidence
        assert (
            r.health.mirror is r.mirror and r.health.queue is r.queue and r.runs.mirror is r.mirror
        )
        assert r.health.client is r.client and r.runs.client is r.client
        assert r.health.state is r.state and r.health.storage is r.storage
        r.mirror.conn.execute("CREATE TABLE IF NOT EXISTS malls (id INTEGER PRIMARY KEY)")
        r.mirror.conn.executemany("INSERT INTO malls (id) VALUES (?)", [(3,), (1,)])
        assert r.malls() == [1, 3]
        # The scrape reads this daemon's parts (`Gauges`), per type it mirrors.
        text = metrics.render()[0].decode()
        assert 'sync_lag_seconds{type="stores"}' in text and "sync_queue_depth 0.0" in text
        assert holder_pid(tmp_path / "m.db") is not None  # the writer lock is held


async def test_the_mirror_is_closed_on_leaving_whatever_happened(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with _running(tmp_path / "m.db", Metrics()) as r:
            mirror = r.mirror
            raise RuntimeError("boom")
    assert holder_pid(tmp_path / "m.db") is None
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        mirror.conn.execute("SELECT 1")


def test_the_recorder_counts_lags_and_repairs_in_metrics_and_the_mirror(mirror: Mirror) -> None:
    metrics = Metrics()
    recorder = Recorder(metrics, mirror)
    recorder.lagged("deals", "notice", [0.5, 2.0])
    recorder.verify_repaired(Repair("deals", 1, ("membership",)))
    recorder.verify_repaired(Repair("deals", 2, ("title", "links.images")))
    recorder.repaired("stores", "missed_change", 3)
    sample = metrics.registry.get_sample_value
    assert sample("sync_change_lag_seconds_count", {"type": "deals", "path": "notice"}) == 2.0
    assert sample("sync_change_lag_seconds_sum", {"type": "deals", "path": "notice"}) == 2.5
    assert sample("sync_verify_repairs_total", {"type": "deals"}) == 2.0
    assert sample("sync_repairs_total", {"type": "deals", "kind": "membership"}) == 1.0
    assert sample("sync_repairs_total", {"type": "deals", "kind": "same_stamp_content"}) == 1.0
    assert sample("sync_repairs_total", {"type": "stores", "kind": "missed_change"}) == 3.0
    meta = dict(mirror.conn.execute("SELECT key, value FROM _sync_meta"))
    assert json.loads(meta["change_lag"])["deals"]["notice"]["count"] == 2
    # The proof book counts the verify's repairs; the proof counts its own where it makes them.
    assert json.loads(meta["repairs"]) == {"deals": {"membership": 1, "same_stamp_content": 1}}
