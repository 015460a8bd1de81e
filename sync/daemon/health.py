"""What the daemon says about itself: `GET /healthz`, the systemd watchdog's verdict, and the
gauges Prometheus reads when it scrapes.

Two objects, because the metrics need their reader before the storage watch and the type faults
(which count into the metrics) exist: `SyncState` is the daemon's record of its own sync (when it
started, when each type last synced, whether it is ready, and the mirror, client and queue once
open) and is the `sync.core.metrics.Live` the scrape reads; `Health` turns that record, the
storage watch and the failing types into the `/healthz` report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sync.channel.client import ChannelClient
from sync.daemon.schedule import parse_stamp
from sync.jobs.typefaults import TypeFaults
from sync.model.catalogue import ResourceType
from sync.readers.status import job_problems, proof_problems
from sync.store import Mirror
from sync.store import proof as proof_book
from sync.store.queue import ChangeQueue
from sync.store.watch import StorageWatch


class SyncState:
    """The daemon's record of its own sync; `Live` for the metrics (read when scraped).

    `mirror`, `client` and `queue` are None until the daemon has opened them (in that order:
    the mirror at start, the client once connected, the queue once serving) and stay set after,
    so a scrape between two of those steps reports what is already there.
    """

    def __init__(self, types: Sequence[ResourceType]) -> None:
        self.types = list(types)
        self.started = time.monotonic()
        #: Monotonic time of each type's last successful sync in this process.
        self.last_ok: dict[str, float] = {}
        self.ready = False  # backfilled and serving
        self.mirror: Mirror | None = None
        self.client: ChannelClient | None = None
        self.queue: ChangeQueue | None = None

    def synced(self, name: str) -> None:
        self.last_ok[name] = time.monotonic()

    def skipped(self, name: str) -> None:
        """Type `name` is not readable by this account: not stale, so health ignores it."""
        self.last_ok.pop(name, None)

    # -- metrics.Live ----------------------------------------------------------------------------

    def lag_seconds(self) -> dict[str, float]:
        """Seconds since each type's last successful sync: this process's, else the mirror's
        record of an earlier one, else this process's age (a type it never synced is as stale
        as the process is old)."""
        now_mono, now = time.monotonic(), time.time()
        recorded: dict[str, str | None] = {}
        if self.mirror is not None:
            recorded = {s.type_name: s.last_sync_at for s in self.mirror.status()}
        out: dict[str, float] = {}
        for t in self.types:
            if t.name in self.last_ok:
                out[t.name] = round(now_mono - self.last_ok[t.name], 1)
                continue
            stamp = recorded.get(t.name)
            then = parse_stamp(stamp) if stamp else None
            age = now - then.timestamp() if then is not None else now_mono - self.started
            out[t.name] = round(age, 1)
        return out

    def rows(self) -> dict[str, int]:
        if self.mirror is None:
            return {}
        return {t.name: self.mirror.count(t.name) for t in self.types}

    def queue_depth(self) -> int:
        return self.queue.depth() if self.queue is not None else 0

    def budget(self) -> dict[str, float | int]:
        client = self.client
        return client.budget.snapshot() if client is not None and client.budget else {}

    def proof(self) -> tuple[dict[str, float], dict[str, int]]:
        """Per type, seconds since it was last proven complete (the process's age when never
        since the mirror began), and the rows its last proof left unresolved."""
        if self.mirror is None:
            return {}, {}
        now = time.time()
        recorded = proof_book.proven(self.mirror.conn)
        ages: dict[str, float] = {}
        unresolved: dict[str, int] = {}
        for t in self.types:
            entry = recorded.get(t.name) or {}
            stamp = entry.get("proven_at")
            then = parse_stamp(stamp) if isinstance(stamp, str) else None
            age = now - then.timestamp() if then is not None else time.monotonic() - self.started
            ages[t.name] = round(age, 1)
            unresolved[t.name] = int(entry.get("unresolved") or 0)
        return ages, unresolved

    def upstream_statuses(self) -> dict[int, int]:
        return dict(self.client.stats.statuses) if self.client is not None else {}


class Health:
    """The `/healthz` report and the watchdog's verdict, from the daemon's `SyncState`."""

    def __init__(
        self,
        state: SyncState,
        *,
        poll_interval: float,
        faults: TypeFaults,
        storage: StorageWatch,
        staleness_bound: float | None = None,
    ) -> None:
        self.state = state
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
        problems = (
            job_problems(state.mirror.jobs(), datetime.now(UTC))
            if state.mirror is not None and state.ready
            else []
        )
        if state.mirror is not None and state.ready:
            # The proof's unresolved differences (the mass-delete guard's case) and a proof
            # overdue past twice the bound.
            problems.extend(proof_problems(state.mirror, datetime.now(UTC), self.staleness_bound))
        if state.client is not None and state.client.unreachable:
            problems.insert(0, state.client.unreachable)  # logged as upstream.unreachable too
        problems.extend(self.faults.problems())
        storage = self.storage.problem()
        if storage is not None:
            problems.insert(0, storage)
        if status == "ok" and problems:
            status = "degraded"  # alive and following, but a repair failed or is overdue
        if not state.ready:
            status = "starting"
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
            "queue_depth": state.queue.depth() if state.queue is not None else None,
        }

    def healthy(self) -> bool:
        """For the systemd watchdog: alive and not stale (a running backfill counts as alive).
        Degraded is healthy here: a restart cannot cure a refused reconcile."""
        return self.report()["status"] in ("ok", "starting", "degraded")
