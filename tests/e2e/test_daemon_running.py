"""The parts a running daemon holds open (`sync.daemon.running`): one value, built in one place
from the settings, sharing one mirror and one client, and closed in one place."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sync.core.metrics import Metrics
from sync.daemon.running import open_running
from sync.daemon.service import Daemon
from sync.daemon.state import SyncState
from sync.emulator import Emulator
from sync.jobs.progress import NullProgress
from sync.jobs.typefaults import TypeFaults
from sync.store import Mirror
from sync.store.watch import StorageWatch
from tests.support.settings import daemon_settings


def _parts(db: Path, settings: object) -> dict[str, object]:
    metrics = Metrics()
    return {
        "state": SyncState(settings.upstream.mirrored_types()),  # type: ignore[attr-defined]
        "metrics": metrics,
        "faults": TypeFaults(metrics=metrics),
        "storage": StorageWatch(db, metrics=metrics),
        "progress": NullProgress(),
        "stop": asyncio.Event(),
    }


async def test_every_part_shares_the_one_mirror_and_client_and_the_scrape_reads_them(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = daemon_settings(emulator, db, webhooks=False)
    parts = _parts(db, settings)
    async with open_running(settings, **parts) as running:  # type: ignore[arg-type]
        # One evidence for the notices, the fast path and the reconcile; one poller.
        assert running.worker.evidence is running.evidence is running.members.evidence
        assert running.evidence is running.reconciler.evidence
        assert running.worker.poller is running.poller and running.worker.members is running.members
        for part in (running.poller, running.proof, running.verifier, running.runs):
            assert part.mirror is running.mirror and part.client is running.client
        assert running.health.queue is running.queue and running.health.state is parts["state"]
        body = running.metrics.render()[0].decode()
        assert "sync_queue_depth 0.0" in body and 'sync_rows{type="malls"} 0.0' in body
        assert running.health.report()["status"] == "starting"


async def test_leaving_closes_the_mirror_even_after_a_failure(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = daemon_settings(emulator, db, webhooks=False)
    with pytest.raises(RuntimeError, match="boom"):
        async with open_running(settings, **_parts(db, settings)):  # type: ignore[arg-type]
            raise RuntimeError("boom")
    Mirror.open(db).close()  # the writer lock was released: another writer may open it


def test_a_daemon_not_yet_running_holds_nothing_open_and_reports_starting(
    emulator: Emulator, tmp_path: Path
) -> None:
    daemon = Daemon(daemon_settings(emulator, tmp_path / "m.db", webhooks=False))
    assert daemon.running is None and daemon.bodies is None
    assert daemon.health()["status"] == "starting" and daemon.healthy()
