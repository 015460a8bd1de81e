"""One run of a scheduled job: its record, its metrics, its pause and its cancellation.

The scheduler (`sync.daemon.service`) never calls a job body (`sync.daemon.bodies`) directly: it
calls the wrapper `JobRuns.wrap` makes, which logs one summary line per run (`job.done`: its
seconds, its upstream requests and what it did, `sync.core.tally`), counts it, keeps
its start, end, outcome and next run in `_sync_jobs` (so a restart resumes the schedule and
`ccsync status` shows it), runs it at its request-budget priority, and lets no exception escape.
While the mirror cannot take writes the job does not run (outcome `paused`); a storage fault
met during a run degrades the daemon (`sync.store.watch`) and ends the run with one line,
never a traceback. On stop, the runs still going are cancelled (`cancel`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog

from sync.channel.budget import Priority, RequestBudget, priority
from sync.channel.client import ChannelClient
from sync.core import tally
from sync.core.errors import SyncError
from sync.core.logs import get_logger
from sync.core.metrics import Metrics
from sync.daemon.schedule import JOB_PRIORITY
from sync.jobs.proving.reconcile import MassDeleteRefused
from sync.model.stamps import iso_ms
from sync.store import MirrorStore
from sync.store.watch import StorageWatch


class JobRuns:
    """Wraps job bodies into scheduled runs and keeps the runs in flight; see the module
    docstring. `stop` is the daemon's: a run cancelled once it is set ends `interrupted`."""

    def __init__(
        self,
        mirror: MirrorStore,
        client: ChannelClient,
        *,
        metrics: Metrics,
        storage: StorageWatch,
        stop: asyncio.Event,
    ) -> None:
        self.mirror = mirror
        self.client = client
        self.metrics = metrics
        self.storage = storage
        self.stop = stop
        self.running: set[asyncio.Task[Any]] = set()
        self.log = get_logger("sync.daemon")

    def wrap(
        self, name: str, fn: Callable[[], Awaitable[object]], every: float = 0.0
    ) -> Callable[[], Awaitable[None]]:
        """Job `name`'s scheduled run of `fn`, due again `every` seconds after it starts."""

        async def run() -> None:
            if self.storage.degraded:
                self.metrics.job_runs.labels(job=name, outcome="paused").inc()
                return  # resumes when the write check sees a write succeed (`Daemon._resumed`)
            try:
                await self._attempt(name, fn, every)
            except asyncio.CancelledError:
                if not self.stop.is_set():
                    raise
                # Stopping (`cancel`): the run ends as `interrupted`, quietly; raised on,
                # APScheduler would log the cancellation as a job failure with a traceback.
            except Exception as exc:
                if self.storage.report(exc) is None:
                    raise
                self.metrics.job_runs.labels(job=name, outcome="paused").inc()

        return run

    async def _attempt(self, name: str, fn: Callable[[], Awaitable[object]], every: float) -> None:
        t0 = time.monotonic()
        started = time.time()
        # Every line logged during the run carries job=<name> (structlog contextvars).
        structlog.contextvars.bind_contextvars(job=name)
        task = asyncio.current_task()
        if task is not None:
            self.running.add(task)
        try:
            self.mirror.jobs.started(name, iso_ms(started))
            if every:
                self.mirror.jobs.scheduled(name, iso_ms(started + every))
        except BaseException:
            if task is not None:
                self.running.discard(task)
            raise
        outcome, error = "interrupted", None
        counted = tally.Tally()
        try:
            with priority(JOB_PRIORITY.get(name, Priority.POLL)), tally.counting() as counted:
                await fn()
            outcome = "ok"
        except Exception as exc:
            fault = self.storage.report(exc)
            if fault is not None:  # the daemon's, not this job's: `run` ends it quietly
                outcome, error = "paused", str(fault)
                raise
            if not isinstance(exc, SyncError | LookupError | MassDeleteRefused):
                raise
            outcome = "refused" if isinstance(exc, MassDeleteRefused) else "error"
            error = str(exc)
            self.metrics.job_runs.labels(job=name, outcome="error").inc()
            self.metrics.errors.labels(kind=type(exc).__name__).inc()
            self.log.error(
                "job.failed",
                job=name,
                seconds=round(time.monotonic() - t0, 3),
                requests=counted.requests,
                error=error,
                **counted.did,
            )
            return
        finally:
            if task is not None:
                self.running.discard(task)
            record_budget(self.mirror, self.client.accounts.budgets())
            self.mirror.jobs.finished(
                name,
                at=iso_ms(time.time()),
                outcome=outcome,
                error=error,
                seconds=round(time.monotonic() - t0, 3),
            )
        self.metrics.job_runs.labels(job=name, outcome="ok").inc()
        # The run's one line: how long, how many requests, and what it did (`sync.core.tally`).
        self.log.info(
            "job.done",
            job=name,
            seconds=round(time.monotonic() - t0, 3),
            requests=counted.requests,
            **counted.did,
        )

    async def cancel(self) -> None:
        """Cancel the runs still going (a poll mid-page stops at its next await)."""
        runs = [t for t in self.running if not t.done()]
        for t in runs:
            t.cancel()
        await asyncio.gather(*runs, return_exceptions=True)


def record_budget(mirror: MirrorStore, budgets: Sequence[RequestBudget]) -> None:
    """The request budget as the daemon finds it, for `ccsync status`: the first account's,
    and with `budget = "per_account"` every account's too (`per_account`, in their order)."""
    if not budgets:
        return
    snapshot: dict[str, Any] = dict(budgets[0].snapshot())
    if len(budgets) > 1:
        snapshot["per_account"] = [b.snapshot() for b in budgets]
    mirror.meta.set("request_budget", json.dumps(snapshot))
