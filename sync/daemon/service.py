"""`ccsync run`: the long-running service that keeps the mirror within seconds of the upstream.

Pieces, each in its own module: the webhook receiver (`webhooks`) writes notices to the durable
queue (`store.queue`) and the worker (`worker`) drains it; APScheduler 3.x jobs (coalesced, one
instance each) run the incremental polls and the deletions feed (`poll`), the reconcile
(`reconcile`), the rolling verify (`verify`), the hours window and the subscription check. The daemon backfills first when the
mirror has never been filled.

Faults are isolated: a type whose route answers badly fails and backs off alone while the other
types' notices and polls go on (`isolation`), and a mirror that cannot take writes (disk full,
read-only, locked) degrades the daemon, pauses its writing work and is probed until it can
(`storage`): the daemon keeps running, reports it, and catches up by itself.

Shutdown (SIGTERM/SIGINT): stop accepting notices, stop the scheduler, cancel the jobs. Every
SQLite write is a synchronous call between two awaits, so cancellation never splits a page's
transaction: the current page is committed or not started, and the process exits 0 within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from sync.channel.budget import Priority, priority
from sync.channel.client import ChannelClient
from sync.channel.profile import Profiler, stale
from sync.core.config import Settings
from sync.core.errors import ForbiddenError, SyncError, UpstreamError
from sync.core.logs import get_logger
from sync.core.metrics import Metrics
from sync.daemon.systemd import Notifier, watchdog_loop
from sync.ingest.receiver import make_receiver_app
from sync.ingest.subscriptions import Subscriptions
from sync.jobs.backfill import Backfill, BackfillReport, bounded, mirror_management_press
from sync.jobs.isolation import TypeFaults
from sync.jobs.mallincludes import PER_MALL, Members, refused
from sync.jobs.mallroutes import ROUTED_BY_MALL, MallRoutes
from sync.jobs.poll import Poller, poll_types
from sync.jobs.progress import Progress, for_terminal
from sync.jobs.reconcile import MassDeleteRefused, Reconciler, reconcile_every_type
from sync.jobs.verify import Verifier
from sync.jobs.worker import QueueWorker
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms
from sync.readers.status import job_problems
from sync.store import Mirror
from sync.store.faults import probe
from sync.store.queue import ChangeQueue
from sync.store.watch import StorageWatch

#: Seconds after start of the first poll and deletions-feed run (they catch up at once).
CATCH_UP = 0.5
#: The request budget's priority of each job's requests (the queue worker's are WEBHOOK).
JOB_PRIORITY: dict[str, Priority] = {
    "poll": Priority.POLL,
    "deletions": Priority.POLL,
    "subscriptions": Priority.POLL,
    "reconcile": Priority.RECONCILE,
    "verify": Priority.RECONCILE,
    "hours": Priority.HOURS,
    "press_releases": Priority.HOURS,
    "changes": Priority.HOURS,
}
#: An overdue job (its stored next run has passed) starts within this window after start,
#: at a random moment (jitter: many daemons restarted together do not hit the upstream at once).
OVERDUE_JITTER = (5.0, 60.0)
#: The rolling verify's tick at most: each tick verifies a share of the mirror sized so that
#: the whole of it is covered once per `verify_interval` (a flat request rate).
VERIFY_TICK = 60.0


def verify_tick(interval: float) -> float:
    """Seconds between two steps of the rolling verify (`VERIFY_TICK`, shorter for a short
    `verify_interval`, so a cycle still takes about 100 steps or more)."""
    return min(VERIFY_TICK, max(interval / 100, 1.0))


def verify_share(cost: int, interval: float) -> float:
    """Requests one step earns, so that a cycle costing `cost` requests takes `interval`:
    a step spends whole requests, and carries what it overspent or left to the next."""
    return cost * verify_tick(interval) / interval


def first_run(name: str, every: float, first: float, stored: str | None, now: datetime) -> datetime:
    """When job `name` first runs after a start.

    Polls and the deletions feed (`first` = `CATCH_UP`) run at once. Other jobs keep the
    schedule they had: the next run stored by the previous process (`stored`, from
    `_sync_jobs`) if it is still ahead (capped at one interval from now), shortly after start
    with jitter if it has passed (a daemon restarted more often than its reconcile interval
    still reconciles), and one interval from now on a mirror that never ran it.
    """
    if first <= CATCH_UP:
        return now + timedelta(seconds=first)
    due = None
    if stored:
        with contextlib.suppress(ValueError):
            due = datetime.strptime(stored, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    if due is None:
        return now + timedelta(seconds=first)
    if due <= now:
        low, high = OVERDUE_JITTER
        high = max(low, min(high, every / 10))
        return now + timedelta(seconds=random.uniform(min(low, every), min(high, every)))
    return min(due, now + timedelta(seconds=every))


def _epoch(stamp: str) -> float | None:
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


class Daemon:
    """Wires the receiver, the queue worker and the scheduled jobs around one mirror and client."""

    def __init__(self, settings: Settings, *, progress: Progress | None = None) -> None:
        self.settings = settings
        self.progress = progress
        self.log = get_logger("sync.daemon")
        self.types: list[ResourceType] = settings.upstream.mirrored_types()
        self.metrics = Metrics(self)
        self.started = time.monotonic()
        self.last_ok: dict[str, float] = {}
        self.stop = asyncio.Event()
        self.notifier = Notifier()
        self.bound_port: int | None = None
        self._mirror: Mirror | None = None
        self.is_ready = False  # set once backfilled and serving
        self._running_jobs: set[asyncio.Task[Any]] = set()
        self._verify_credit = 0.0  # requests the rolling verify may spend (`verify_step`)
        self._members_detected = False  # `detect_members` has decided (`sync.jobs.mallincludes`)
        self._sched: AsyncIOScheduler | None = None
        # A mirror that cannot take writes degrades the daemon until a probe write succeeds;
        # a type whose route answers badly backs off alone (module docstring).
        self.storage = StorageWatch(Path(settings.mirror.path), metrics=self.metrics)
        self.storage.on_resumed = self._resumed
        self.type_faults = TypeFaults(metrics=self.metrics)

    # -- health --------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """Liveness plus the age of the last successful sync per type (GET /healthz); while the
        mirror cannot take writes, `degraded` with the fault's `reason` and `storage`."""
        now = time.monotonic()
        limit = max(3 * self.settings.schedule.poll_interval, 300.0)
        ages = {name: round(now - t, 1) for name, t in self.last_ok.items()}
        stale = [n for n, age in ages.items() if age > limit]
        warming = now - self.started < limit
        status = "ok" if (warming or not stale) else "stale"
        problems = (
            job_problems(self.mirror.jobs(), datetime.now(UTC))
            if self._mirror is not None and self.is_ready
            else []
        )
        client: ChannelClient | None = getattr(self, "client", None)
        if client is not None and client.unreachable:
            problems.insert(0, client.unreachable)  # logged as upstream.unreachable too
        problems.extend(self.type_faults.problems())
        storage = self.storage.problem()
        if storage is not None:
            problems.insert(0, storage)
        if status == "ok" and problems:
            status = "degraded"  # alive and following, but a repair failed or is overdue
        if not self.is_ready:
            status = "starting"
        if storage is not None:
            status = "degraded"  # whatever else: nothing it fetches can be written
        return {
            "status": status,
            "reason": self.storage.fault.reason if self.storage.fault is not None else None,
            "storage": self.storage.snapshot(),
            "problems": problems,
            "ready": self.is_ready,
            "uptime_s": round(now - self.started, 1),
            "last_sync_age_s": ages,
            "stale_types": stale,
            "queue_depth": self._queue.depth() if hasattr(self, "_queue") else None,
        }

    def healthy(self) -> bool:
        """For the systemd watchdog: alive and not stale (a running backfill counts as alive).
        Degraded is healthy here: a restart cannot cure a refused reconcile."""
        return self.health()["status"] in ("ok", "starting", "degraded")

    # -- jobs ----------------------------------------------------------------------------------

    def _job(
        self, name: str, fn: Callable[[], Awaitable[object]], every: float = 0.0
    ) -> Callable[[], Awaitable[None]]:
        """Wrap a job: one summary log line per run, metrics, and no exception escapes.

        Each run's start, end, outcome and the next run (start + `every`) are kept in
        `_sync_jobs`, so a restart resumes the schedule instead of resetting it, and
        `ccsync status` shows them. While the mirror cannot take writes the job does not run
        (outcome `paused` in the metrics); a storage fault met during a run degrades the
        daemon (`sync.store.watch`) and ends the run with one line, never a traceback.
        """

        async def run() -> None:
            if self.storage.degraded:
                self.metrics.job_runs.labels(job=name, outcome="paused").inc()
                return  # resumes when the probe sees a write succeed (`_resumed`)
            try:
                await attempt()
            except asyncio.CancelledError:
                if not self.stop.is_set():
                    raise
                # Stopping (`_cancel_jobs`): the run ends as `interrupted`, quietly; raised on,
                # APScheduler would log the cancellation as a job failure with a traceback.
            except Exception as exc:
                if self.storage.report(exc) is None:
                    raise
                self.metrics.job_runs.labels(job=name, outcome="paused").inc()

        async def attempt() -> None:
            t0 = time.monotonic()
            started = time.time()
            # Every line logged during the run carries job=<name> (structlog contextvars).
            structlog.contextvars.bind_contextvars(job=name)
            task = asyncio.current_task()
            if task is not None:
                self._running_jobs.add(task)
            try:
                self.mirror.job_started(name, iso_ms(started))
                if every:
                    self.mirror.job_scheduled(name, iso_ms(started + every))
            except BaseException:
                if task is not None:
                    self._running_jobs.discard(task)
                raise
            outcome, error = "interrupted", None
            try:
                with priority(JOB_PRIORITY.get(name, Priority.POLL)):
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
                self.log.error("job.failed", job=name, error=error)
                return
            finally:
                if task is not None:
                    self._running_jobs.discard(task)
                if self.client.budget is not None:  # for `ccsync status`
                    self.mirror.set_meta(
                        "request_budget", json.dumps(self.client.budget.snapshot())
                    )
                self.mirror.job_finished(
                    name,
                    at=iso_ms(time.time()),
                    outcome=outcome,
                    error=error,
                    seconds=round(time.monotonic() - t0, 3),
                )
            self.metrics.job_runs.labels(job=name, outcome="ok").inc()
            self.log.info("job.done", job=name, seconds=round(time.monotonic() - t0, 3))

        return run

    async def poll_all(self) -> None:
        """Incremental poll of every type and scope: the mall-scoped types on the fast path
        in one walk of `/malls?include=` (`sync.jobs.mallincludes`), the others by listing, side by
        side (the walk beside `concurrency` listed types at a time), so a slow or failing
        route holds up only its own types. A type that fails is recorded and backs off
        (`sync.jobs.isolation`) while the others are polled; the run then fails naming it."""
        if not self._members_detected:
            await self.detect_members()
        fast = {t.name for t in self.members.fast()}
        limit = self.settings.upstream.concurrency

        def listed(names: set[str]) -> Awaitable[None]:
            due = [t for t in poll_types(self.types) if t.name in names]
            due = [t for t in due if self.type_faults.due(t.name)]
            return bounded(due, limit, lambda rtype: self._isolated(rtype, self.poll_type(rtype)))

        async def walk() -> None:
            if not any(self.type_faults.due(name) for name in fast):
                return
            try:
                covered = await self._poll_members()
            except UpstreamError as exc:
                for name in sorted(fast):  # one walk serves them all: it failed for each
                    self._type_failed(name, exc)
                return
            await listed(fast - covered)  # it fell back to per-mall listings mid-walk

        others = {t.name for t in poll_types(self.types)} - fast
        parts: list[Callable[[], Awaitable[None]]] = [walk, lambda: listed(others)]
        await bounded(parts, len(parts), lambda part: part())
        self._raise_failing({t.name for t in poll_types(self.types)})

    def _raise_failing(self, names: set[str]) -> None:
        """End a job run that went on past failing types by naming them (its outcome is then
        `error`, in `ccsync status` and `/healthz`)."""
        failing = sorted(n for n in names if n in self.type_faults.failing)
        if failing:
            raise SyncError(
                f"{', '.join(failing)} failing; the other types went on: "
                + "; ".join(f"{n}: {self.type_faults.failing[n].error}" for n in failing)
            )

    async def detect_members(self) -> None:
        """Decide again how each mall-scoped type is polled (at start, before each reconcile).
        A transient failure keeps the last decision; the next poll tries again."""
        try:
            await self.members.detect()
            self._members_detected = True
        except UpstreamError as exc:
            self.log.warning("members.detect_failed", error=str(exc))

    async def _poll_members(self, only: set[str] | None = None) -> set[str]:
        """Poll the fast path's types (those of `only`, when given); the names it covered. A
        4xx mid-walk (the upstream stopped serving it) falls back to per-mall listings now."""
        names = {t.name for t in self.members.fast()}
        if only is not None and not names & only:
            return set()
        try:
            written = await self.members.poll()
        except UpstreamError as exc:
            if not refused(exc):
                raise
            self.members.fall_back(f"GET /malls?include= answered {exc.status} during a poll")
            return set()
        for name in names:
            self._ok(name)
            if written.get(name):
                self.log.info("poll.changed", type=name, rows=written[name], via="members")
        return names

    async def locate(self, rtype: ResourceType, ids: list[int]) -> None:
        """Rows of a mall-scoped type the mirror does not hold (creations announced by
        webhooks): found through the malls' linkage, or by `filter[id]` in recently active
        malls; per mall, what is still not found makes a poll of every mall."""
        try:
            found = await self.members.locate(rtype, ids)
        except UpstreamError as exc:
            if not refused(exc):
                raise
            self.members.fall_back(f"GET /malls?include= answered {exc.status} (locate)")
            found = set()
        if len(found) < len(set(ids)) and self.members.mode(rtype) == PER_MALL:
            await self.poll_type(rtype)

    async def _isolated(self, rtype: ResourceType, work: Awaitable[object]) -> None:
        """One type's part of a job, whose failure cannot stop the types after it. A type
        the account may not read (403) is reported in `ccsync status` and skipped; any other
        upstream failure (a bad answer, retries spent) is recorded against the type and backs
        it off (`_type_failed`)."""
        try:
            await work
        except ForbiddenError as exc:
            error = f"not readable by this account (403); skipped: {exc.message}"
            self.mirror.record_type_status(
                rtype.name, ok=False, error=error, at=iso_ms(time.time())
            )
            self.last_ok.pop(rtype.name, None)  # skipped, not stale: health ignores it
            self.log.warning("job.type_forbidden", type=rtype.name, hint=exc.hint)
        except UpstreamError as exc:
            self._type_failed(rtype.name, exc)

    def _type_failed(self, name: str, exc: UpstreamError) -> None:
        """Type `name` failed (a job's part or the worker's lane): its backoff grows, and
        `ccsync status` shows the error as its last."""
        delay = self.type_faults.failed(name, str(exc))
        self.log.warning("type.failed", type=name, error=str(exc), retry_in=round(delay, 2))
        self._record_type_error(name, exc)

    def _record_type_error(self, name: str, exc: UpstreamError) -> None:
        self.mirror.record_type_status(name, ok=False, error=str(exc), at=iso_ms(time.time()))

    async def poll_type(self, rtype: ResourceType) -> None:
        """Poll every scope of `rtype` (one per mall for mall-scoped types), `concurrency` at a
        time: the request budget, not one-at-a-time round trips, bounds how fast a cycle goes.
        A mall-scoped type on the fast path is polled through `/malls?include=` instead."""
        if rtype.level == "mall" and await self._poll_members({rtype.name}):
            return
        changed = 0

        async def one(scope: Scope) -> None:
            nonlocal changed
            try:
                rows = (await self.poller.poll_scope(scope)).rows
            except LookupError:
                # A mall that appeared since the backfill: its scope starts from now.
                self.mirror.set_cursor(rtype.name, scope.key, iso_ms(self._upstream_now() - 86400))
                rows = (await self.poller.poll_scope(scope)).rows
            changed += rows  # after the await: scopes run side by side

        await bounded(scopes_of(rtype, self._malls()), self.settings.upstream.concurrency, one)
        if changed and rtype.name in ROUTED_BY_MALL:
            # Where the malls' contacts or deals come from their routes (`sync.jobs.mallroutes`), a
            # row created or changed may have joined a mall: the routes are listed again.
            routes = MallRoutes(self.client, self.mirror)
            if routes.decisions().get(rtype.name) == "route":
                await routes.from_routes(rtype.name, self._malls())
        self._ok(rtype.name)
        if changed:
            self.log.info("poll.changed", type=rtype.name, rows=changed)

    async def poll_deletions(self) -> None:
        result = await self.poller.poll_deletions({t.name for t in self.types})
        if result.rows:
            self.log.info("deletions.applied", entries=result.rows)

    async def reconcile_all(self) -> None:
        """The deletions feed first (a day of churn is not a glitch), then every type
        (`reconcile_every_type`, shared with `ccsync reconcile`); a refusal in one type or mall
        never stops the others, and all are raised together at the end (the job's outcome is
        then `refused`, and health says so)."""
        with contextlib.suppress(LookupError):
            await self.poll_deletions()
        await self.detect_members()
        await self.probe_if_stale()
        result = await reconcile_every_type(self.reconciler, self.types, each=self._reconciled)
        if result.pruned:
            self.log.info("sideloads.pruned", **result.pruned)
        if result.refusals:
            raise MassDeleteRefused("; ".join(result.refusals))
        self._raise_failing({t.name for t in self.types})

    async def _probe_quietly(self) -> None:
        """Beside the first jobs: the upstream profile, and the `malls_deals` derivation a
        backfill left unchecked (`sync.jobs.mallroutes`)."""
        with priority(Priority.POLL):
            await self.probe_if_stale()
            routes = MallRoutes(self.client, self.mirror)
            if routes.decisions().get("deals") == "unchecked":
                try:
                    await routes.refresh(["deals"], self._malls())
                except UpstreamError as exc:
                    self.log.warning("mall_routes.check_failed", error=str(exc))

    async def probe_if_stale(self) -> None:
        """Probe what the spec leaves open (`sync.channel.profile`) when no profile is kept or
        it is a day old; a failure keeps the last profile (strategies fall back safely)."""
        if not stale(self.client.profile, time.time()):
            return
        try:
            self.client.profile = await Profiler(self.client).probe(self.types, self._malls())
        except UpstreamError as exc:
            self.log.warning("upstream.probe_failed", error=str(exc))
            return
        if self.client.save_profile is not None:
            self.client.save_profile()
        self.log.info("upstream.probed", routes=len(self.client.profile.routes))

    async def _reconciled(self, rtype: ResourceType, work: Awaitable[None]) -> None:
        """One type's part of the reconcile, isolated (`_isolated`); healthy once it is done."""

        async def then_ok() -> None:
            await work
            self._ok(rtype.name)

        await self._isolated(rtype, then_ok())

    async def verify_step(self) -> None:
        """The next share of the rolling verify (`sync.jobs.verify`); repairs are counted."""
        malls = self._malls()
        interval = self.settings.schedule.verify_interval
        self._verify_credit += verify_share(self.verifier.cost(self.types, malls), interval)
        if self._verify_credit < 1:
            return  # a small mirror: not one request due yet
        report = await self.verifier.step(self.types, malls, int(self._verify_credit))
        self._verify_credit -= report.requests
        if report.repaired or report.cycle_done:
            self.log.info(
                "verify.step",
                rows=report.rows,
                requests=report.requests,
                repaired=report.repairs,
                removed=report.removed,
                cycle_done=report.cycle_done,
            )

    async def prune_changes(self) -> None:
        """Drop change feed entries older than `[mirror] changes_retention_days`."""
        n = self.mirror.prune_changes(self.settings.mirror.changes_retention_days)
        if n:
            self.log.info("changes.pruned", entries=n)

    async def refresh_hours(self) -> None:
        today = datetime.fromtimestamp(self._upstream_now(), tz=UTC).date()
        end = today + timedelta(days=self.settings.schedule.hours_days)
        for mall_id in self._malls():
            await self.backfill.refresh_hours(mall_id, today, end)

    def _record_subscriptions(self) -> None:
        self.mirror.set_meta("webhook_topics", ",".join(sorted(self.subscriptions.topics)))
        self.mirror.set_meta("webhook_topics_checked_at", iso_ms(time.time()))

    async def mirror_press(self) -> None:
        """Full listing of the management API's press releases (no updated-since filter)."""
        if self.settings.management is not None:
            await mirror_management_press(
                self.mirror, self.settings.management, BackfillReport(), fail_fast=False
            )

    async def check_subscriptions(self) -> None:
        vanished = await self.subscriptions.ensure()
        self._record_subscriptions()
        for topic in vanished:
            rtype = next((t for t in self.types if t.name == topic), None)
            if rtype is not None:
                await self.poll_type(rtype)  # catch up on what the lost subscription missed

    # -- metrics.Live: read when Prometheus scrapes -----------------------------------------

    def lag_seconds(self) -> dict[str, float]:
        """Seconds since each type's last successful sync: this process's, else the mirror's
        record of an earlier one, else this process's age (a type it never synced is as stale
        as the process is old)."""
        now_mono, now = time.monotonic(), time.time()
        recorded: dict[str, str | None] = {}
        if self._mirror is not None:
            recorded = {s.type_name: s.last_sync_at for s in self.mirror.status()}
        out: dict[str, float] = {}
        for t in self.types:
            if t.name in self.last_ok:
                out[t.name] = round(now_mono - self.last_ok[t.name], 1)
                continue
            stamp = recorded.get(t.name)
            then = _epoch(stamp) if stamp else None
            out[t.name] = round(now - then if then is not None else now_mono - self.started, 1)
        return out

    def rows(self) -> dict[str, int]:
        if self._mirror is None:
            return {}
        return {t.name: self.mirror.count(t.name) for t in self.types}

    def queue_depth(self) -> int:
        return self._queue.depth() if hasattr(self, "_queue") else 0

    def budget(self) -> dict[str, float | int]:
        client: ChannelClient | None = getattr(self, "client", None)
        return client.budget.snapshot() if client is not None and client.budget else {}

    def upstream_statuses(self) -> dict[int, int]:
        client: ChannelClient | None = getattr(self, "client", None)
        return dict(client.stats.statuses) if client is not None else {}

    def _ok(self, name: str) -> None:
        self.last_ok[name] = time.monotonic()
        self.type_faults.succeeded(name)
        self.mirror.record_type_status(name, ok=True, at=iso_ms(time.time()))

    def _malls(self) -> list[int]:
        return list(self.mirror.ids("malls"))

    def _upstream_now(self) -> float:
        return time.time() + self.client.clock_offset

    @property
    def mirror(self) -> Mirror:
        assert self._mirror is not None
        return self._mirror

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Backfill if needed, then serve until `stop` is set (SIGTERM/SIGINT set it)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        self._mirror = Mirror.open(
            self.settings.mirror.path, checkpoints=self.settings.mirror.checkpoints
        )
        try:
            # Not fail-fast: an upstream unreachable at start is logged and retried, not fatal.
            async with ChannelClient(self.settings.upstream, fail_fast=False) as client:
                self.client = client
                await self._serve()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            self.mirror.close()
            self.notifier.stopping()
            self.log.info("daemon.stopped")

    def request_stop(self) -> None:
        self.log.info("daemon.stopping")
        self.notifier.stopping()
        self.stop.set()

    async def _serve(self) -> None:
        s = self.settings
        self.mirror.on_values = lambda t, outcome, n: self.metrics.values.labels(
            type=t, outcome=outcome
        ).inc(n)
        self._queue = ChangeQueue(self.mirror.conn)
        self.poller = Poller(
            self.client,
            self.mirror,
            page_size=s.upstream.page_size,
            overlap=s.schedule.poll_overlap,
        )
        self.reconciler = Reconciler(
            self.client, self.mirror, max_delete_share=s.schedule.reconcile_max_delete_share
        )
        self.backfill = Backfill(
            self.client, self.mirror, s, progress=self.progress or for_terminal(quiet=True)
        )
        self.verifier = Verifier(
            self.client,
            self.mirror,
            on_repair=lambda r: self.metrics.verify_repairs.labels(type=r.type).inc(),
        )
        self.members = Members(
            self.client,
            self.mirror,
            self.reconciler.fetcher,
            self.types,
            self._malls,
            page_size=s.upstream.members_page_size,
            enabled=s.upstream.mall_includes == "auto",
        )
        self.worker = QueueWorker(
            self.mirror,
            self._queue,
            self.reconciler.fetcher,
            self.types,
            locate=self.locate,
            touch=self.members.touch,
            batch_delay=s.schedule.queue_batch_delay,
            faults=self.type_faults,
            storage=self.storage,
            on_type_failed=self._record_type_error,
        )
        runner: web.AppRunner | None = None
        if s.webhooks.enabled:
            runner = await self._start_receiver()
        self.subscriptions = Subscriptions(self.client, s.webhooks, self.types, self.bound_port)

        # Ready for systemd as soon as notices are accepted: a first backfill of a large
        # upstream takes longer than any start timeout, and the watchdog covers it meanwhile.
        self.notifier.ready()
        tasks = [
            asyncio.create_task(watchdog_loop(self.notifier, self.healthy), name="watchdog"),
            asyncio.create_task(self.storage.run(self._probe, self.stop), name="storage"),
        ]
        if self.mirror.get_cursor("deletions", "") is None or self.mirror.get_meta(
            "backfill_started_at"
        ):
            self.log.info("daemon.backfill_first")
            self.notifier.status("backfilling")
            if not await self._first_backfill():
                for task in tasks:  # the watchdog loop never ends by itself: waiting on it hung
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if runner is not None:
                    await runner.cleanup()
                return
        for rtype in self.types:
            self._ok(rtype.name)

        tasks.append(asyncio.create_task(self.worker.run(self.stop), name="worker"))
        with priority(Priority.POLL):
            await self._unless_stopped(self.detect_members(), "detect_members")
        scheduler = self._sched = self._scheduler()
        scheduler.start()
        try:
            if s.webhooks.enabled:
                try:
                    # Raced with SIGTERM: an upstream that fails or stalls retries for minutes.
                    if await self._unless_stopped(self.subscriptions.ensure(), "subscribe"):
                        self._record_subscriptions()
                except UpstreamError as exc:
                    self.log.error("subscriptions.failed", error=str(exc))
            if not self.stop.is_set():
                # The upstream profile (`sync.channel.profile`) is probed beside the jobs, not
                # before them: each strategy falls back safely until it is known.
                tasks.append(asyncio.create_task(self._probe_quietly(), name="probe"))
                self.notifier.status("following the upstream")
                self.is_ready = True
                self.log.info("daemon.ready", types=len(self.types), webhooks=s.webhooks.enabled)
            await self.stop.wait()
        finally:
            if runner is not None:
                await runner.cleanup()  # stop accepting notices first
            scheduler.shutdown(wait=False)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._cancel_jobs()

    async def _first_backfill(self) -> bool:
        """The first backfill. A storage fault pauses it, the daemon degraded meanwhile
        (`sync.store.watch`), and once a write succeeds again it resumes from its checkpoints.
        False when stopped first."""
        while True:
            try:
                return await self._unless_stopped(self.backfill.run(), "backfill")
            except Exception as exc:
                if self.storage.report(exc) is None:
                    raise
            if not await self._unless_stopped(self.storage.writable.wait(), "degraded"):
                return False
            progress = self.progress or for_terminal(quiet=True)
            self.backfill = Backfill(self.client, self.mirror, self.settings, progress=progress)

    def _probe(self, degraded: bool) -> None:
        """The storage watch's write probe; while degraded it waits 0.2 s at most for another
        writer's lock (it runs every few seconds, on the event loop), and a full disk must
        have room again on its file system too."""
        fault = self.storage.fault
        probe(
            self.mirror.conn,
            self.mirror.path,
            busy_ms=200 if degraded else None,
            room=fault is not None and fault.reason == "disk_full",
        )

    async def _resumed(self) -> None:
        """Writes succeed again: drain the queue, check the webhook subscriptions (the upstream
        drops one after 5 deliveries answered 503) and poll at once, catching up on what the
        refused deliveries and the paused jobs missed."""
        self.worker.wake()
        if self._sched is None:
            return  # still starting: the first polls run once it is up
        now = datetime.now(UTC)
        for name in ("subscriptions", "poll", "deletions"):
            job = self._sched.get_job(name)
            if job is not None:
                job.modify(next_run_time=now)

    async def _unless_stopped(self, work: Awaitable[object], name: str) -> bool:
        """Await `work` unless `stop` is set first, which cancels it at its next await (a
        page is committed or not, a retry's backoff ends). True when `work` finished; its
        exception, if any, is raised."""
        task = asyncio.ensure_future(work)
        task.set_name(name)
        stopper = asyncio.create_task(self.stop.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            return False
        task.result()
        return True

    def poll_cycle(self) -> dict[str, float]:
        """What one poll cycle costs when nothing changed (one request per scope, plus the
        deletions feed), how long it takes at the request budget, and so the staleness bound
        without webhooks: `poll_interval` + that time (logged at start as `poll.cycle`)."""
        malls = self._malls()
        fast = {t.name for t in self.members.fast()}
        requests = 1 + sum(
            len(scopes_of(t, malls)) for t in poll_types(self.types) if t.name not in fast
        )
        if fast:
            requests += self.members.pages()  # one walk of `/malls?include=` covers them all
        rate = self.settings.upstream.max_requests_per_second
        seconds = requests / rate if rate > 0 else 0.0
        return {
            "requests": requests,
            "seconds_at_budget": round(seconds, 1),
            "staleness_bound_s": round(self.settings.schedule.poll_interval + seconds, 1),
        }

    def _scheduler(self) -> AsyncIOScheduler:
        s = self.settings.schedule
        scheduler = AsyncIOScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )
        now = datetime.now(UTC)
        jobs: list[tuple[str, Callable[[], Awaitable[object]], float, float]] = [
            # Catch up at once on what changed while the daemon was down.
            ("poll", self.poll_all, s.poll_interval, CATCH_UP),
            ("deletions", self.poll_deletions, s.deletions_interval, CATCH_UP),
            ("reconcile", self.reconcile_all, s.reconcile_interval, s.reconcile_interval),
            ("hours", self.refresh_hours, s.hours_interval, s.hours_interval),
            # The change feed's retention: at start, then hourly.
            ("changes", self.prune_changes, 3600.0, CATCH_UP),
            # Rolling: its position is kept in the mirror, so it resumes where it stopped.
            (
                "verify",
                self.verify_step,
                verify_tick(s.verify_interval),
                verify_tick(s.verify_interval),
            ),
        ]
        management = self.settings.management
        if management is not None:
            jobs.append(
                (
                    "press_releases",
                    self.mirror_press,
                    management.press_releases_interval,
                    management.press_releases_interval,
                )
            )
        if self.settings.webhooks.enabled:
            jobs.append(
                (
                    "subscriptions",
                    self.check_subscriptions,
                    s.subscriptions_interval,
                    s.subscriptions_interval,
                )
            )
        cycle = self.poll_cycle()
        if cycle["seconds_at_budget"] > s.poll_interval:
            self.log.warning(
                "poll.cycle_overruns",
                **cycle,
                hint="a poll cycle takes longer than [schedule] poll_interval at this request "
                "budget: raise [upstream] max_requests_per_second or poll_interval",
            )
        else:
            self.log.info("poll.cycle", **cycle)
        stored = self.mirror.jobs()
        for name, fn, every, first in jobs:
            at = first_run(name, every, first, stored.get(name, {}).get("next_run_at"), now)
            self.mirror.job_scheduled(name, iso_ms(at.timestamp()))
            scheduler.add_job(
                self._job(name, fn, every),
                "interval",
                seconds=every,
                next_run_time=at,
                id=name,
                name=name,
            )
        return scheduler

    async def _cancel_jobs(self) -> None:
        """Cancel job coroutines still running (a poll mid-page stops at its next await)."""
        jobs = [t for t in self._running_jobs if not t.done()]
        for t in jobs:
            t.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

    async def _start_receiver(self) -> web.AppRunner:
        s = self.settings.webhooks
        app = make_receiver_app(
            s,
            self._queue,
            on_enqueued=self.worker.wake,
            metrics=self.metrics,
            health=self.health,
            storage=self.storage,
        )
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, s.host, s.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else s.port
        self.log.info("receiver.listening", listen=f"{s.host}:{self.bound_port}")
        return runner
