"""`ccsync run`: the long-running service that keeps the mirror within seconds of the upstream.

This module is the daemon's lifecycle: it opens its parts (one `Running` value, built and closed
in `sync.daemon.running`), backfills first when the mirror has never been filled, schedules the
jobs, and stops. The parts, each in its own module: the HTTP app (`sync.daemon.http`) hands
webhook deliveries to the receiver (`sync.ingest.receiver`), which writes notices to the durable
queue (`sync.store.queue`); the queue worker (`sync.jobs.incremental.queueworker`) drains it; APScheduler 3.x
jobs (coalesced, one instance each) run the job bodies (`sync.daemon.bodies`: the incremental
polls and the deletions feed, the rolling proof and verify, the hours window, the subscription
check), each run recorded by `sync.daemon.runs`, at times `sync.daemon.schedule` computes;
`sync.daemon.health` reports.

Faults are isolated: a type whose route answers badly fails and backs off alone while the other
types' notices and polls go on (`sync.jobs.typefaults`), and a mirror that cannot take writes
(disk full, read-only, locked) degrades the daemon, pauses its writing work and is checked until
it can (`sync.store.watch`): the daemon keeps running, reports it, and catches up by itself.

A PostgreSQL mirror has one writer: before it opens anything that writes, the daemon takes the
mirror's active lock, waiting as a standby while another daemon holds it (`sync.daemon.standby`:
`/healthz` 200 `standby`, webhooks 503); a lock lost while active ends the term at once (the
scheduler, the worker and the jobs stopped, the mirror closed) and the daemon waits as a
standby again, in the same process (issue #49).

Shutdown (SIGTERM/SIGINT): stop accepting notices, stop the scheduler, cancel the jobs. Every
SQLite write is a synchronous call between two awaits, so cancellation never splits a page's
transaction: the current page is committed or not started, and the process exits 0 within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from sync.channel.budget import Priority, priority
from sync.core.config import Settings
from sync.core.errors import LoginRefusedError, MirrorError, UpstreamError
from sync.core.logs import get_logger
from sync.core.metrics import Metrics
from sync.daemon.bodies import Bodies
from sync.daemon.http import make_app, serve
from sync.daemon.running import Running, open_running
from sync.daemon.schedule import CATCH_UP, backfill_retry_delay, first_run, verify_tick
from sync.daemon.standby import Standby
from sync.daemon.state import SyncState
from sync.daemon.systemd import Notifier, watchdog_loop
from sync.ingest.receiver import Receiver
from sync.ingest.subscriptions import Subscriptions
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.progress import Progress, for_terminal
from sync.jobs.proving.pacing import proof_tick
from sync.jobs.typefaults import TypeFaults
from sync.model.catalogue import ResourceType
from sync.model.stamps import iso_ms
from sync.readers import verdict
from sync.store import MirrorStore
from sync.store.faults import UNREACHABLE, classify, database_errors
from sync.store.runs import HEARTBEAT_S
from sync.store.watch import StorageWatch

if TYPE_CHECKING:  # psycopg is loaded only for a PostgreSQL mirror
    from sync.store.pg.lock import ActiveLock


class Daemon:
    """Owns the daemon's resources, like arq's `Worker`: what needs neither the open mirror
    nor the connected client is built here; the rest is one value (`Running`,
    `sync.daemon.running`) that `run` builds once, hands to the job bodies, the HTTP app and
    the watchdog, and closes in one place. `running` and `bodies` are None until then."""

    def __init__(self, settings: Settings, *, progress: Progress | None = None) -> None:
        self.settings = settings
        self.progress = progress or for_terminal(quiet=True)
        self.log = get_logger("sync.daemon")
        self.types: list[ResourceType] = settings.upstream.mirrored_types()
        self.state = SyncState(self.types)
        # The scrape reads the open parts once they are built (`Metrics.watch`).
        self.metrics = Metrics()
        self.target = settings.mirror.target
        # A mirror that cannot take writes degrades the daemon until a write check succeeds;
        # a type whose route answers badly backs off alone (module docstring).
        self.storage = StorageWatch(self.target, metrics=self.metrics, on_resumed=self._resumed)
        self.type_faults = TypeFaults(metrics=self.metrics)
        self.stop = asyncio.Event()
        self.notifier = Notifier()
        #: A PostgreSQL mirror's wait for its active lock; the lock while this daemon holds it.
        self.standby = Standby(self.target, notifier=self.notifier) if self.target.url else None
        self.lock: ActiveLock | None = None
        self._exiting = False  # SIGTERM/SIGINT: no term follows this one
        self._lost = False  # this term ended because the lock was lost
        self.bound_port: int | None = None  # the receiver's, once it listens
        self.running: Running | None = None  # once the mirror is open and the client connected
        self.bodies: Bodies | None = None  # once the receiver listens
        #: What `ccsync status` was last told: readiness and `Health.live` (`_record_health`).
        self._kept_health: tuple[bool, list[str]] | None = None
        self._sched: AsyncIOScheduler | None = None  # once the first backfill is done

    # -- what it reports -----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The `/healthz` report (`sync.daemon.health`); `standby` while another daemon holds
        a PostgreSQL mirror (`Standby.report`); `starting` until the mirror is open."""
        if self.running is None:
            if self.standby is not None and self.standby.waiting:
                return self.standby.report()
            return {"status": "starting", "ready": False, "problems": []}
        report = self.running.health.report()
        if self.lock is not None:
            report.update(role="active", lock=self.lock.status())
        return report

    def healthy(self) -> bool:
        """For the systemd watchdog (`Health.healthy`)."""
        return self.running is None or self.running.health.healthy()

    @property
    def is_ready(self) -> bool:
        """Backfilled and serving."""
        return self.state.ready

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Backfill if needed, then serve until `stop` is set (SIGTERM/SIGINT set it). A
        PostgreSQL mirror's daemon first waits for the active lock, and again after losing it
        (module docstring)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            while True:
                lock = None
                if self.standby is not None:
                    lock = await self.standby.wait(
                        self.stop, self.settings.webhooks, self.health, self.metrics
                    )
                    if lock is None:
                        break
                if not await self._term(lock):
                    break
                self._next_term()
            self.log.info("daemon.stopped")  # not on an error: its own `ccsync:` line says it
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            self.notifier.stopping()

    async def _term(self, lock: ActiveLock | None) -> bool:
        """Open the running parts (with `lock`, a PostgreSQL mirror's) and serve until
        stopped; True when the term ended because the lock was lost (wait again), not asked
        to stop. The lock is released after the mirror is closed: no write follows it."""
        self.lock, self._lost = lock, False
        try:
            async with open_running(
                self.settings,
                state=self.state,
                metrics=self.metrics,
                faults=self.type_faults,
                storage=self.storage,
                progress=self.progress,
                stop=self.stop,
                lock=lock,
            ) as running:
                self.running = running
                await self._recorded(running)
        except Exception as exc:
            # The server gone mid-term fails what was writing: retried as a standby, as a lost
            # upstream is retried, when it is no bug (`unreachable`, or the lock gone with it).
            if lock is None or not (classify(exc) == UNREACHABLE or not lock.held()):
                raise
            self.log.error("daemon.term_failed", error=str(exc), hint="waiting as a standby")
            self._lost = True
        finally:
            if lock is not None:
                lock.release()
            self.lock = None
        return self._lost and not self._exiting

    def _lock_lost(self) -> None:
        """The lock is gone: end the term now (`Standby.keep`)."""
        self._lost = True
        self.stop.set()

    def _next_term(self) -> None:
        """Fresh state for the term after a lost lock: nothing of the last one carries over
        but the metrics and the types' fault records."""
        self.stop.clear()
        self.state = SyncState(self.types)
        self.storage = StorageWatch(self.target, metrics=self.metrics, on_resumed=self._resumed)
        self.running = self.bodies = self._sched = self._kept_health = self.bound_port = None

    async def _recorded(self, running: Running) -> None:
        """Serve, kept as a `daemon` run in the mirror (`ccsync status`)."""
        mirror = running.mirror
        run_id, status, error = mirror.runs.start("daemon"), "failed", None
        try:
            await self._serve(running)
            status = "stopped" if self.stop.is_set() else "failed"
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "stopped"
            raise
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            raise
        finally:
            # Else the next open says `interrupted` (MirrorError: a lost lock refuses the write).
            with contextlib.suppress(*database_errors(), MirrorError):
                mirror.runs.finish(run_id, status=status, rows=None, error=error)

    def request_stop(self) -> None:
        self._exiting = True
        self.log.info("daemon.stopping")
        self.notifier.stopping()
        self.stop.set()

    async def _serve(self, running: Running) -> None:
        s = self.settings
        mirror, worker = running.mirror, running.worker
        for line in s.retired():
            self.log.warning("config.retired_key", hint=line)
        for line in s.cautions():
            self.log.warning("config.refuses_what_the_spec_allows", hint=line)
        runner: web.AppRunner | None = None
        if s.webhooks.enabled:
            runner = await self._listen(running)
        subscriptions = Subscriptions(
            running.client, s.webhooks, self.types, bound_port=self.bound_port
        )
        bodies = self.bodies = Bodies(running, subscriptions)

        # Ready for systemd as soon as notices are accepted: a first backfill of a large
        # upstream takes longer than any start timeout, and the watchdog covers it meanwhile.
        self.notifier.ready()
        tasks = [
            asyncio.create_task(watchdog_loop(self.notifier, self.healthy), name="watchdog"),
            asyncio.create_task(
                self.storage.run(lambda degraded: self._check_writes(mirror, degraded), self.stop),
                name="storage",
            ),
            asyncio.create_task(self._heartbeat(mirror, running), name="heartbeat"),
        ]
        if self.lock is not None and self.standby is not None:
            keep = self.standby.keep(self.lock, self._lock_lost, mirror.storage.lost)
            tasks.append(asyncio.create_task(keep, name="lock"))
        first = self._never_completed(mirror)
        if first is not None:
            self.log.info("daemon.backfill_first", types=first)
            self.notifier.status("backfilling")
            if not await self._first_backfill(running, first):
                for task in tasks:  # the watchdog loop never ends by itself: waiting on it hung
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if runner is not None:
                    await runner.cleanup()
                return
        for rtype in self.types:
            bodies.ok(rtype.name)

        tasks.append(asyncio.create_task(worker.run(self.stop), name="worker"))
        with priority(Priority.POLL):
            await self._unless_stopped(bodies.detect_members(), "detect_members")
        scheduler = self._sched = self._scheduler(bodies, running)
        scheduler.start()
        try:
            if s.webhooks.enabled:
                try:
                    # Raced with SIGTERM: an upstream that fails or stalls retries for minutes.
                    if await self._unless_stopped(bodies.subscriptions.ensure(), "subscribe"):
                        bodies.record_subscriptions()
                except UpstreamError as exc:
                    self.log.error("subscriptions.failed", error=str(exc))
            if not self.stop.is_set():
                # The upstream profile (`sync.channel.profile`) is probed beside the jobs, not
                # before them: each strategy falls back safely until it is known.
                tasks.append(asyncio.create_task(bodies.probe_quietly(), name="probe"))
                self.notifier.status("following the upstream")
                self.state.ready = True
                with contextlib.suppress(*database_errors()):  # `ccsync status` says so at once
                    self._record_health(mirror, running)
                self.log.info("daemon.ready", types=len(self.types), webhooks=s.webhooks.enabled)
            await self.stop.wait()
        finally:
            if runner is not None:
                await runner.cleanup()  # stop accepting notices first
            scheduler.shutdown(wait=False)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await running.runs.cancel()
            await bodies.lanes.close()

    async def _listen(self, running: Running) -> web.AppRunner:
        """Serve the receiver, `/healthz` and `/metrics` (`sync.daemon.http`)."""
        s = self.settings.webhooks
        receiver = Receiver(
            s,
            running.queue,
            on_enqueued=running.worker.wake,
            metrics=running.metrics,
            storage=running.storage,
        )
        app = make_app(receiver, health=self.health, metrics=running.metrics)
        runner, self.bound_port = await serve(app, s.host, s.port)
        self.log.info("receiver.listening", listen=f"{s.host}:{self.bound_port}")
        return runner

    def _never_completed(self, mirror: MirrorStore) -> list[str] | None:
        """The types the daemon backfills before it serves: those no backfill ever completed
        (`Mirror.backfills.completed_types`), when the mirror was never filled or a backfill was left
        unfinished; None when there is nothing to backfill. A type some backfill completed is
        never copied again here: an unfinished or failed `ccsync backfill` left it whole, and
        the polls from its cursors catch up (a re-copy costs hours of the upstream's budget
        at a million rows); `ccsync backfill` resumes the interrupted run if wanted."""
        unfinished = mirror.meta.get("backfill_started_at") is not None
        no_feed = mirror.cursors.get("deletions", "") is None
        if not unfinished and not no_feed:
            return None
        done = mirror.backfills.completed_types()
        never = [t.name for t in self.types if t.name not in done]
        if never or no_feed:
            return never
        self.log.info(
            "daemon.backfill_left",
            hint="a backfill was left unfinished, but every type was completed by an earlier "
            "one: the polls catch up; `ccsync backfill` resumes it if wanted",
        )
        return None

    async def _first_backfill(self, running: Running, types: list[str]) -> bool:
        """The first backfill, of `types`. A storage fault pauses it, the daemon degraded
        meanwhile (`sync.store.watch`), and once a write succeeds again a new one resumes from
        the checkpoints. An upstream failure (retries spent, a session refused again and again,
        a body not JSON:API) is asked again after `backfill_retry_delay`, resuming from the
        checkpoints, the daemon degraded meanwhile: an outage of the upstream is not a reason to
        exit. Credentials the login refuses are (`LoginRefusedError`: a setting to fix). False
        when stopped first."""
        failures = 0
        while True:
            backfill = Backfill(
                running.client, running.mirror, self.settings, progress=self.progress
            )
            try:
                done = await self._unless_stopped(backfill.run(only=types), "backfill")
                self.state.backfill_failed = None
                return done
            except LoginRefusedError:
                raise
            except UpstreamError as exc:
                failures += 1
                delay = backfill_retry_delay(failures)
                self.state.backfill_failed = (
                    f"the first backfill failed ({failures} in a row): {exc}; asked again "
                    f"{delay:.0f} s after, from its checkpoints"
                )
                self.log.error(
                    "daemon.backfill_failed",
                    error=str(exc),
                    failures=failures,
                    retry_in=delay,
                    hint="the daemon keeps running and asks again; nothing written is lost",
                )
                if not await self._unless_stopped(asyncio.sleep(delay), "backfill_retry"):
                    return False
                continue
            except Exception as exc:
                if self.storage.report(exc) is None:
                    raise
            if not await self._unless_stopped(self.storage.writable.wait(), "degraded"):
                return False

    async def _heartbeat(self, mirror: MirrorStore, running: Running) -> None:
        """Every `HEARTBEAT_S`, the daemon's runs are seen alive (`ccsync status` shows it; a
        run killed with SIGKILL is `interrupted` as of its last heartbeat); within a second of
        a change, its readiness and the problems only it knows (`Health.live`: an unreachable
        upstream...) are recorded for `ccsync status` (`sync.readers.verdict`). A mirror that
        takes no writes skips a beat: the storage watch reports that."""
        beat = time.monotonic()
        while True:
            if not self.storage.degraded:
                with contextlib.suppress(*database_errors()):
                    self._record_health(mirror, running)
                    if time.monotonic() - beat >= HEARTBEAT_S:
                        mirror.runs.heartbeat()
                        beat = time.monotonic()
            await asyncio.sleep(1.0)

    def _record_health(self, mirror: MirrorStore, running: Running) -> None:
        """Record the readiness and `Health.live` problems for `ccsync status`, if changed."""
        now = (self.state.ready, running.health.live())
        if now != self._kept_health:
            verdict.record(mirror.meta, ready=now[0], problems=now[1])
            self._kept_health = now

    def _check_writes(self, mirror: MirrorStore, degraded: bool) -> None:
        """The storage watch's write check; while degraded it waits 0.2 s at most for another
        writer's lock (it runs every few seconds, on the event loop), and a full disk must
        have room again on its file system too."""
        fault = self.storage.fault
        mirror.storage.check_writes(
            busy_ms=200 if degraded else None,
            room=fault is not None and fault.reason == "disk_full",
        )

    async def _resumed(self) -> None:
        """Writes succeed again: drain the queue, check the webhook subscriptions (the upstream
        drops one after 5 deliveries answered 503) and poll at once, catching up on what the
        refused deliveries and the paused jobs missed."""
        if self.running is not None:
            self.running.worker.wake()
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

    def _scheduler(self, bodies: Bodies, running: Running) -> AsyncIOScheduler:
        s = self.settings.schedule
        scheduler = AsyncIOScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )
        now = datetime.now(UTC)
        tick = verify_tick(s.verify_interval)
        planned: list[tuple[str, Callable[[], Awaitable[object]], float, float]] = [
            # Catch up at once on what changed while the daemon was down.
            ("poll", bodies.poll_all, s.poll_interval, CATCH_UP),
            ("deletions", bodies.poll_deletions, s.deletions_interval, CATCH_UP),
            # The rolling proof (the daily reconcile's successor): a share of the cycle per
            # tick, its position in the mirror; its first tick soon after start.
            ("proof", bodies.proof_step, proof_tick(s.staleness_bound), CATCH_UP + 1.0),
            ("hours", bodies.refresh_hours, s.hours_interval, s.hours_interval),
            # The change feed's retention: at start, then hourly.
            ("changes", bodies.prune_changes, 3600.0, CATCH_UP),
            # Rolling: its position is kept in the mirror, so it resumes where it stopped.
            ("verify", bodies.verify_step, tick, tick),
        ]
        management = self.settings.management
        if management is not None:
            every = management.press_releases_interval
            planned.append(("press_releases", bodies.mirror_press, every, every))
        if self.settings.webhooks.enabled:
            every = s.subscriptions_interval
            planned.append(("subscriptions", bodies.check_subscriptions, every, every))
        cycle = bodies.poll_cycle()
        if cycle["seconds_at_budget"] > s.poll_interval:
            self.log.warning(
                "poll.cycle_overruns",
                **cycle,
                hint="a poll cycle takes longer than [schedule] poll_interval at this request "
                "budget: raise [upstream] max_requests_per_second or poll_interval",
            )
        else:
            self.log.info("poll.cycle", **cycle)
        mirror = running.mirror
        stored = mirror.jobs.all()
        if "reconcile" in stored:
            mirror.jobs.retired("reconcile")  # the rolling proof replaced it (#39)
        for name, fn, every, first in planned:
            at = first_run(name, every, first, stored.get(name, {}).get("next_run_at"), now)
            mirror.jobs.scheduled(name, iso_ms(at.timestamp()))
            scheduler.add_job(
                running.runs.wrap(name, fn, every),
                "interval",
                seconds=every,
                next_run_time=at,
                id=name,
                name=name,
            )
        return scheduler
