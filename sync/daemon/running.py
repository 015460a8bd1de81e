"""What a running daemon holds open: one value, built in one place, closed in one place.

Like arq's `Worker`, which builds its pool, functions and health itself and closes them in
`close`: `open_running` opens the mirror and connects the client, builds every part that needs
them (the queue, the library jobs the bodies drive, the queue worker, the run records, the health
report and the live gauges) into one `Running`, and closes the client and the mirror on leaving.
The service (`sync.daemon.service`) hands that value to the job bodies (`sync.daemon.bodies`), the
HTTP app (`sync.daemon.http`) and the watchdog; no part is read back through another object or set
on a collaborator from outside.

`SyncState` is the daemon's record of its own sync (when it started, when each type last synced,
whether it is ready); `Recorder` is what the jobs report into the metrics and the proof book.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.core.metrics import Metrics
from sync.daemon.health import Gauges, Health
from sync.daemon.runs import JobRuns
from sync.daemon.state import SyncState
from sync.jobs.evidence import Evidence, Settling
from sync.jobs.incremental.poll import Poller
from sync.jobs.incremental.queueworker import QueueWorker
from sync.jobs.malls.mallincludes import MallIncludes
from sync.jobs.progress import Progress
from sync.jobs.proving.proof import Proof
from sync.jobs.proving.reconcile import Reconciler
from sync.jobs.proving.verify import Verifier
from sync.jobs.typefaults import TypeFaults
from sync.model.catalogue import ResourceType
from sync.store import MirrorStore
from sync.store.opening import open_mirror
from sync.store.repair import Repair
from sync.store.seamparts import ChangeQueuePart
from sync.store.watch import StorageWatch

if TYPE_CHECKING:  # psycopg is loaded only for a PostgreSQL mirror
    from sync.store.pg.lock import ActiveLock


class Recorder:
    """What the jobs report as they commit: the lag and repair metrics, and the summaries of
    both in the mirror that `ccsync status` reads."""

    def __init__(self, metrics: Metrics, mirror: MirrorStore) -> None:
        self.metrics = metrics
        self.mirror = mirror

    def lagged(self, type_name: str, path: str, seconds: Sequence[float]) -> None:
        """Changes committed by `path`, `seconds` after their stamps: the histogram and the
        summary `ccsync status` reads."""
        for value in seconds:
            self.metrics.change_lag.labels(type=type_name, path=path).observe(value)
        self.mirror.proof.record_lags(type_name, path, list(seconds))

    def repaired(self, type_name: str, kind: str, n: int) -> None:
        """A repair the proof (or the verify) made: `sync_repairs_total{type,kind}`."""
        self.metrics.repairs.labels(type=type_name, kind=kind).inc(n)

    def verify_repaired(self, r: Repair) -> None:
        kind = "membership" if tuple(r.what) == ("membership",) else "same_stamp_content"
        self.metrics.verify_repairs.labels(type=r.type).inc()
        self.mirror.proof.count_repairs(r.type, kind, 1)
        self.repaired(r.type, kind, 1)


@dataclass(frozen=True)
class Running:
    """Everything the daemon holds while it runs; see the module docstring."""

    settings: Settings
    types: list[ResourceType]
    state: SyncState
    metrics: Metrics
    faults: TypeFaults
    storage: StorageWatch
    progress: Progress
    mirror: MirrorStore
    client: ChannelClient
    queue: ChangeQueuePart
    recorder: Recorder
    evidence: Evidence
    poller: Poller
    reconciler: Reconciler[ChannelClient]
    verifier: Verifier
    proof: Proof
    members: MallIncludes
    worker: QueueWorker
    runs: JobRuns
    health: Health

    def malls(self) -> list[int]:
        return list(self.mirror.table("malls").ids())


def build(
    settings: Settings,
    mirror: MirrorStore,
    client: ChannelClient,
    *,
    state: SyncState,
    metrics: Metrics,
    faults: TypeFaults,
    storage: StorageWatch,
    progress: Progress,
    stop: asyncio.Event,
) -> Running:
    """Every part that needs the open mirror and the connected client, wired once."""
    s = settings
    types = list(state.types)
    mirror.values.on_values = lambda t, outcome, n: metrics.values.labels(
        type=t, outcome=outcome
    ).inc(n)
    queue = mirror.queue.open()
    recorder = Recorder(metrics, mirror)

    def malls() -> list[int]:
        return list(mirror.table("malls").ids())

    poller = Poller(
        client,
        mirror,
        page_size=s.upstream.page_size,
        overlap=s.schedule.poll_overlap,
        on_unknown_type=lambda name, n: metrics.feed_unknown_types.labels(resource_type=name).inc(
            n
        ),
        on_lag=recorder.lagged,
        lookback_max=s.schedule.poll_lookback_max,
        on_lateness=metrics.lateness,
        notices=queue,  # the notices a poll page answered leave it (`incremental.answered`)
    )
    settling = Settling(client.clock.now_ts, s.schedule.poll_lookback_max)
    reconciler = Reconciler(
        client,
        mirror,
        max_delete_share=s.schedule.reconcile_max_delete_share,
        settling=settling,
    )
    evidence = reconciler.evidence  # one evidence for the reconcile, the fast path and the notices
    members = MallIncludes(
        client,
        mirror,
        evidence,
        types,
        malls,
        page_size=s.upstream.members_page_size,
        enabled=s.upstream.mall_includes == "auto",
    )
    proof = Proof(
        client,
        mirror,
        types,
        max_delete_share=s.schedule.reconcile_max_delete_share,
        on_repair=recorder.repaired,
        on_lag=recorder.lagged,
        fast=lambda: [t.name for t in members.fast()],
        members_page_size=s.upstream.members_page_size,
        settling=settling,
    )
    worker = QueueWorker(
        mirror,
        queue,
        evidence,
        types,
        members=members,
        poller=poller,
        concurrency=s.upstream.concurrency,
        faults=faults,
        storage=storage,
        batch_delay=s.schedule.queue_batch_delay,
        on_lag=recorder.lagged,
        now=client.clock.now_ts,
    )
    # The scrape reads these parts from now on (`sync.core.metrics.Live`).
    metrics.watch(Gauges(state, mirror, client, queue))
    return Running(
        settings=s,
        types=types,
        state=state,
        metrics=metrics,
        faults=faults,
        storage=storage,
        progress=progress,
        mirror=mirror,
        client=client,
        queue=queue,
        recorder=recorder,
        evidence=evidence,
        poller=poller,
        reconciler=reconciler,
        verifier=Verifier(client, mirror, on_repair=recorder.verify_repaired),
        proof=proof,
        members=members,
        worker=worker,
        runs=JobRuns(mirror, client, metrics=metrics, storage=storage, stop=stop),
        health=Health(
            state,
            mirror=mirror,
            client=client,
            queue=queue,
            faults=faults,
            storage=storage,
            poll_interval=s.schedule.poll_interval,
            staleness_bound=s.schedule.staleness_bound,
        ),
    )


@asynccontextmanager
async def open_running(
    settings: Settings,
    *,
    state: SyncState,
    metrics: Metrics,
    faults: TypeFaults,
    storage: StorageWatch,
    progress: Progress,
    stop: asyncio.Event,
    lock: ActiveLock | None = None,
) -> AsyncIterator[Running]:
    """Open the mirror, connect the client and build the rest (`build`); on leaving, the
    client is closed and then the mirror, whatever happened. `lock`: a PostgreSQL mirror's
    active lock, taken (`sync.daemon.standby`)."""
    mirror = open_mirror(settings.mirror.target, checkpoints=settings.mirror.checkpoints, lock=lock)
    try:
        # Not fail-fast: an upstream unreachable at start is logged and retried, not fatal.
        async with ChannelClient(settings.upstream, fail_fast=False, store=mirror.meta) as client:
            yield build(
                settings,
                mirror,
                client,
                state=state,
                metrics=metrics,
                faults=faults,
                storage=storage,
                progress=progress,
                stop=stop,
            )
    finally:
        mirror.close()
