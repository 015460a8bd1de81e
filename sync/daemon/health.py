"""What the daemon says about itself: `GET /healthz`, the systemd watchdog's verdict, and the
gauges Prometheus reads when it scrapes.

Both read the daemon's record of its own sync (`sync.daemon.state.SyncState`) and the mirror,
client and queue it holds open, handed in when they are built (`sync.daemon.running`): `Gauges`
is the `sync.core.metrics.Live` the scrape reads; `Health` turns the record, the storage watch
and the failing types into the `/healthz` report.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from sync.channel.client import ChannelClient
from sync.daemon.schedule import parse_stamp
from sync.daemon.state import SyncState
from sync.jobs.typefaults import TypeFaults
from sync.readers.status import job_problems, proof_problems
from sync.store import MirrorStore
from sync.store.seamparts import ChangeQueuePart
from sync.store.watch import StorageWatch


class Gauges:
    """What the metrics read when scraped (`sync.core.metrics.Live`): the lag, rows, queue
    depth, request budget, proof ages and upstream answers of the open mirror and client."""

    def __init__(
        self, state: SyncState, mirror: MirrorStore, client: ChannelClient, queue: ChangeQueuePart
    ) -> None:
        self.state = state
        self.types = state.types
        self.mirror = mirror
        self.client = client
        self.queue = queue

    # -- metrics.Live ----------------------------------------------------------------------------

    def lag_seconds(self) -> dict[str, float]:
        """Seconds since each type's last successful sync: this process's, else the mirror's
        record of an earlier one, else this process's age (a type it never synced is as stale
        as the process is old)."""
        now_mono, now = time.monotonic(), time.time()
        recorded = {s.type_name: s.last_sync_at for s in self.mirror.types.lines()}
        state = self.state
        out: dict[str, float] = {}
        for t in self.types:
            if t.name in state.last_ok:
                out[t.name] = round(now_mono - state.last_ok[t.name], 1)
                continue
            stamp = recorded.get(t.name)
            then = parse_stamp(stamp) if stamp else None
            age = now - then.timestamp() if then is not None else now_mono - state.started
            out[t.name] = round(age, 1)
        return out

    def rows(self) -> dict[str, int]:
        return {t.name: self.mirror.table(t.name).count() for t in self.types}

    def queue_depth(self) -> int:
        return self.queue.depth()

    def budget(self) -> dict[str, float | int]:
        return self.client.budget_snapshot()

    def proof(self) -> tuple[dict[str, float], dict[str, int]]:
        """Per type, seconds since it was last proven complete (the process's age when never
        since the mirror began), and the rows its last proof left unresolved."""
        now = time.time()
        recorded = self.mirror.proof.proven()
        ages: dict[str, float] = {}
        unresolved: dict[str, int] = {}
        for t in self.types:
            entry = recorded.get(t.name) or {}
            stamp = entry.get("proven_at")
            then = parse_stamp(stamp) if isinstance(stamp, str) else None
            age = (
                now - then.timestamp()
                if then is not None
                else time.monotonic() - self.state.started
            )
            ages[t.name] = round(age, 1)
            unresolved[t.name] = int(entry.get("unresolved") or 0)
        return ages, unresolved

    def upstream_statuses(self) -> dict[int, int]:
        return dict(self.client.stats.statuses)


class Health:
    """The `/healthz` report and the watchdog's verdict, from the daemon's `SyncState` and its
    open mirror, client and queue."""

    def __init__(
        self,
        state: SyncState,
        *,
        mirror: MirrorStore,
        client: ChannelClient,
        queue: ChangeQueuePart,
        poll_interval: float,
        faults: TypeFaults,
        storage: StorageWatch,
        staleness_bound: float | None = None,
    ) -> None:
        self.state = state
        self.mirror = mirror
        self.client = client
        self.queue = queue
        self.staleness_bound = staleness_bound
        #: A type not synced for this long is stale (and the daemon is warming up until then).
        self.stale_after = max(3 * poll_interval, 300.0)
        self.faults = faults
        self.storage = storage

    def report(self) -> dict[str, Any]:
        """Liveness plus the age of the last successful sync per type (GET /healthz); while the
        mirror cannot take writes, `degraded` with the fault's `reason` and `storage`."""
        state = self.state
        now = time.monotonic()
        ages = {name: round(now - t, 1) for name, t in state.last_ok.items()}
        stale = [n for n, age in ages.items() if age > self.stale_after]
        warming = now - state.started < self.stale_after
        status = "ok" if (warming or not stale) else "stale"
        problems: list[str] = []
        if state.ready:
            problems = job_problems(self.mirror.jobs.all(), datetime.now(UTC))
            # The proof's unresolved differences (the mass-delete guard's case) and a proof
            # overdue past twice the bound.
            problems.extend(proof_problems(self.mirror, datetime.now(UTC), self.staleness_bound))
        problems = self._unserved() + problems + self.faults.problems()
        storage = self.storage.problem()
        if storage is not None:
            problems.insert(0, storage)
        if status == "ok" and problems:
            status = "degraded"  # alive and following, but a repair failed or is overdue
        if not state.ready:
            status = "starting" if state.backfill_failed is None else "degraded"
        if storage is not None:
            status = "degraded"  # whatever else: nothing it fetches can be written
        return {
            "status": status,
            "reason": self.storage.fault.reason if self.storage.fault is not None else None,
            "storage": self.storage.snapshot(),
            "problems": problems,
            "ready": state.ready,
            "uptime_s": round(now - state.started, 1),
            "last_sync_age_s": ages,
            "stale_types": stale,
            "queue_depth": self.queue.depth(),
        }

    def live(self) -> list[str]:
        """The problems only this process knows, none of them in the mirror: a first backfill
        that failed, an unreachable upstream, types failing. `ccsync status` reads them as
        the daemon records them (`sync.readers.verdict.record`)."""
        return self._unserved() + self.faults.problems()

    def _unserved(self) -> list[str]:
        """A first backfill that failed, an unreachable upstream: the report's first problems."""
        problems = []
        if self.state.backfill_failed is not None:
            problems.append(self.state.backfill_failed)  # logged as daemon.backfill_failed too
        # The session's own state, read there: a client property that only returned it is
        # the forward `tests/unit/channel/test_client.py` forbids (#41).
        if unreachable := self.client.session.unreachable:
            problems.append(unreachable)  # logged as upstream.unreachable too
        return problems

    def healthy(self) -> bool:
        """For the systemd watchdog: alive and not stale (a running backfill counts as alive).
        Degraded is healthy here: a restart cannot cure a refused reconcile."""
        return self.report()["status"] in ("ok", "starting", "degraded")
