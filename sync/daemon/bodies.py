"""The daemon's scheduled job bodies: what each of its jobs does, over the parts the daemon
holds open (`sync.daemon.running`).

Each body wires library jobs (`sync.jobs`) together the way the long-running service needs
them: the incremental polls side by side with each type isolated (`sync.jobs.typefaults`), the
deletions feed, the rolling proof's and the rolling verify's shares per tick, the change feed's retention, the hours window, the management
press releases and the webhook subscription check. When and how they run (the scheduler, the
run records, pausing while the mirror cannot take writes) is `sync.daemon.service`'s.

A type that succeeds is recorded as synced (`sync.daemon.state.SyncState.synced`, and in the
mirror for `ccsync status`); one that fails is recorded and backs off while the others go on,
and the job run then fails naming it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable

from sync.channel.budget import Priority, priority
from sync.channel.profile import stale
from sync.channel.profiler import Profiler
from sync.core import tally
from sync.core.errors import ForbiddenError, NoProgressError, SyncError, UpstreamError
from sync.core.logs import get_logger
from sync.daemon.lanes import Lanes
from sync.daemon.running import Running
from sync.daemon.schedule import poll_cycle, verify_share
from sync.ingest.subscriptions import Subscriptions
from sync.jobs.fanout import bounded
from sync.jobs.incremental.poll import poll_types
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.jobs.malls.hours import MallHours
from sync.jobs.malls.mallincludes import refused
from sync.jobs.malls.mallroutes import ROUTED_BY_MALL, MallRoutes
from sync.jobs.malls.touchedmalls import TouchedMalls
from sync.jobs.press import mirror_press
from sync.jobs.proving.pacing import keepable_bound, proof_share
from sync.jobs.typefaults import record_type
from sync.model.catalogue import ResourceType
from sync.model.scopes import scopes_of
from sync.model.stamps import iso_ms


class Bodies:
    """The job bodies, over the parts the daemon holds open (`sync.daemon.running.Running`) and
    the webhook subscriptions (built once the receiver listens, `Daemon._serve`)."""

    def __init__(self, running: Running, subscriptions: Subscriptions) -> None:
        self.running = running
        self.settings = running.settings
        self.types = running.types
        self.client = running.client
        self.mirror = running.mirror
        self.state = running.state
        self.faults = running.faults
        self.log = get_logger("sync.daemon")
        self.poller = running.poller
        self.verifier = running.verifier
        self.proof = running.proof
        self.members = running.members
        self.subscriptions = subscriptions
        #: Requests the rolling proof may spend (`proof_step`).
        self.proof_credit = 0.0
        self.proof_checked = False  # whether the budget can keep the bound was logged
        #: Requests the rolling verify may spend (`verify_step`); may be set to run a whole cycle.
        self.verify_credit = 0.0
        self.members_detected = (
            False  # `detect_members` has decided (`sync.jobs.malls.mallincludes`)
        )
        self.ties = TombstoneTies(running.evidence)
        #: One lane per type for the polls (`sync.daemon.lanes`).
        self.lanes = Lanes(self.settings.upstream.concurrency)

    # -- polls ---------------------------------------------------------------------------------

    async def poll_all(self) -> None:
        """Incremental poll of every type and scope: the mall-scoped types on the fast path
        in one walk of `/malls?include=` (`sync.jobs.malls.mallincludes`), the others by listing, each
        type in its own lane (`sync.daemon.lanes`, `concurrency` at a time), so a slow or
        failing route holds up only its own type: one still polling after `poll_interval`
        goes on in its lane while the job ends. A type that fails is recorded and backs off
        (`sync.jobs.typefaults`) while the others are polled; the run then fails naming it."""
        if not self.members_detected:
            await self.detect_members()
        fast = {t.name for t in self.members.fast()}

        async def listed(names: set[str]) -> None:
            due = [t for t in poll_types(self.types) if t.name in names]
            due = [t for t in due if self.faults.due(t.name)]
            work = {t.name: functools.partial(self._polled, t) for t in due}
            busy = await self.lanes.run(work, within=self.settings.schedule.poll_interval)
            if busy:
                self.log.info(
                    "poll.lanes_busy",
                    types=busy,
                    hint="their polls outlast the poll interval; the other types go on",
                )

        async def walk() -> None:
            if not any(self.faults.due(name) for name in fast):
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
        # Copies this cycle (or the notices, the proof) met stamped their tombstone's very
        # moment: `filter[id]` decides (`sync.jobs.incremental.tombstoneties`); a failure asks next cycle.
        try:
            await self.ties.settle(t.name for t in self.types)
        except UpstreamError as exc:
            self.log.warning("tombstone.ties_unsettled", error=str(exc))
        self._raise_failing({t.name for t in poll_types(self.types)})

    async def _polled(self, rtype: ResourceType) -> None:
        await self._isolated(rtype, self.poll_type(rtype))

    async def poll_type(self, rtype: ResourceType) -> None:
        """Poll every scope of `rtype` (one per mall for mall-scoped types), `concurrency` at a
        time: the request budget, not one-at-a-time round trips, bounds how fast a cycle goes.
        A mall-scoped type on the fast path is polled through `/malls?include=` instead."""
        if rtype.level == "mall" and await self._poll_members({rtype.name}):
            return
        changed = await self.poller.poll_type(
            rtype, self.malls(), self.settings.upstream.concurrency
        )
        if rtype.name in ROUTED_BY_MALL:
            # Where the malls' contacts or deals come from their routes, the rows changed since
            # (by any path) are asked of the routes, once per change (`sync.jobs.malls.touchedmalls`).
            await TouchedMalls(self.client, self.mirror).follow(rtype.name, self.malls())
        self.ok(rtype.name)
        if changed:
            tally.note(rows=changed)  # on the run's `job.done` line
            self.log.debug("poll.changed", type=rtype.name, rows=changed)

    async def detect_members(self) -> None:
        """Decide again how each mall-scoped type is polled (at start, before each reconcile).
        A transient failure keeps the last decision; the next poll tries again."""
        try:
            await self.members.detect()
            self.members_detected = True
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
            self.ok(name)
            if written.get(name):
                tally.note(rows=written[name])
                self.log.debug("poll.changed", type=name, rows=written[name], via="members")
        return names

    async def poll_deletions(self) -> None:
        try:
            result = await self.poller.poll_deletions({t.name for t in self.types})
        except NoProgressError:
            self.running.metrics.no_progress.labels(listing="deletions").inc()
            raise
        if result.rows:
            tally.note(deletions=result.rows)
            self.log.debug("deletions.applied", entries=result.rows)

    def poll_cycle(self) -> dict[str, float]:
        """What one poll cycle costs when nothing changed (one request per scope, plus the
        deletions feed), how long it takes at the request budget, and so the staleness bound
        without webhooks: `poll_interval` + that time (logged at start as `poll.cycle`)."""
        malls = self.malls()
        fast = {t.name for t in self.members.fast()}
        requests = 1 + sum(
            len(scopes_of(t, malls)) for t in poll_types(self.types) if t.name not in fast
        )
        if fast:
            requests += self.members.pages()  # one walk of `/malls?include=` covers them all
        return poll_cycle(
            requests,
            self.settings.upstream.max_requests_per_second,
            self.settings.schedule.poll_interval,
        )

    # -- repairs -------------------------------------------------------------------------------

    async def proof_step(self) -> None:
        """The next share of the rolling proof (`sync.jobs.proving.proof`): a cycle per
        `[schedule] staleness_bound`. At a cycle's start the mall-scoped types' polling and the
        upstream profile are checked again, as before the daily reconcile."""
        bound = self.settings.schedule.staleness_bound
        cost = self.proof.cost()
        # For `ccsync status`, which reads the mirror alone: the bound, what a cycle costs, and
        # the verify's bound shown beside it.
        self.mirror.meta.set("proof_cycle_cost", str(cost))
        self.mirror.meta.set("staleness_bound", str(bound))
        self.mirror.meta.set("verify_interval", str(self.settings.schedule.verify_interval))
        if not self.proof_checked:
            self.proof_checked = True
            keep = keepable_bound(cost, self.settings.upstream.max_requests_per_second, bound)
            if not keep["fits"]:
                self.log.warning(
                    "proof.bound_overruns",
                    cycle_requests=cost,
                    **keep,
                    hint="a proof cycle needs more than half the request budget for "
                    "[schedule] staleness_bound: raise it or [upstream] max_requests_per_second",
                )
        self.proof_credit += proof_share(cost, bound)
        if self.proof_credit < 1:
            return
        if self.proof.at_cycle_start:
            await self.detect_members()
            await self.probe_if_stale()
        report = await self.proof.step(int(self.proof_credit))
        self.proof_credit = max(0.0, self.proof_credit - report.requests)
        if report.repairs or report.cycle_done or report.unresolved:
            self.log.info(
                "proof.step",
                requests=report.requests,
                repaired=report.repairs,
                unresolved=report.unresolved,
                proven=report.proven,
                cycle_done=report.cycle_done,
            )

    async def verify_step(self) -> None:
        """The next share of the rolling verify (`sync.jobs.proving.verify`); repairs are counted."""
        malls = self.malls()
        interval = self.settings.schedule.verify_interval
        self.verify_credit += verify_share(self.verifier.cost(self.types, malls), interval)
        if self.verify_credit < 1:
            return  # a small mirror: not one request due yet
        report = await self.verifier.step(self.types, malls, int(self.verify_credit))
        self.verify_credit -= report.requests
        tally.note(
            verified=report.rows,
            repaired=report.repaired,
            removed=sum(report.removed.values()),
            cycles=int(report.cycle_done),
        )
        if report.repaired or report.cycle_done:
            self.log.debug(
                "verify.step",
                rows=report.rows,
                requests=report.requests,
                repaired=report.repairs,
                removed=report.removed,
                cycle_done=report.cycle_done,
            )

    async def probe_quietly(self) -> None:
        """Beside the first jobs: the upstream profile, and the `malls_deals` derivation a
        backfill left unchecked, or an older version took as agreed with nothing
        (`sync.jobs.malls.mallroutes`)."""
        with priority(Priority.POLL):
            await self.probe_if_stale()
            routes = MallRoutes(self.client, self.mirror)
            if routes.deals_unproven():
                try:
                    await routes.refresh(["deals"], self.malls())
                except UpstreamError as exc:
                    self.log.warning("mall_routes.check_failed", error=str(exc))

    async def probe_if_stale(self) -> None:
        """Probe what the spec leaves open (`sync.channel.profile`) when no profile is kept or
        it is a day old; a failure keeps the last profile (strategies fall back safely)."""
        if not stale(self.client.profile, time.time()):
            return
        try:
            profile = await Profiler(self.client).probe(self.types, self.malls())
        except UpstreamError as exc:
            self.log.warning("upstream.probe_failed", error=str(exc))
            return
        self.client.learn_profile(profile)
        self.log.info("upstream.probed", routes=len(profile.routes))

    # -- upkeep --------------------------------------------------------------------------------

    async def prune_changes(self) -> None:
        """Drop change feed entries older than `[mirror] changes_retention_days`."""
        n = self.mirror.changes.prune(self.settings.mirror.changes_retention_days)
        if n:
            tally.note(changes_pruned=n)
            self.log.debug("changes.pruned", entries=n)

    async def refresh_hours(self) -> None:
        """The hours of every mall for the next `[schedule] hours_days`, one mall at a time."""
        hours = MallHours(self.client, self.mirror)
        await hours.refresh_all(self.malls(), self.settings.schedule.hours_days, limit=1)

    async def mirror_press(self) -> None:
        """Full listing of the management API's press releases (no updated-since filter)."""
        if self.settings.management is not None:
            await mirror_press(self.mirror, self.settings.management, fail_fast=False)

    async def check_subscriptions(self) -> None:
        vanished = await self.subscriptions.ensure()
        self.record_subscriptions()
        for topic in vanished:
            rtype = next((t for t in self.types if t.name == topic), None)
            if rtype is not None:
                await self.poll_type(rtype)  # catch up on what the lost subscription missed

    def record_subscriptions(self) -> None:
        self.mirror.meta.set("webhook_topics", ",".join(sorted(self.subscriptions.topics)))
        self.mirror.meta.set("webhook_topics_checked_at", iso_ms(time.time()))

    # -- per type ------------------------------------------------------------------------------

    async def _isolated(self, rtype: ResourceType, work: Awaitable[object]) -> None:
        """One type's part of a job, whose failure cannot stop the types after it. A type
        the account may not read (403) is reported in `ccsync status` and skipped; any other
        upstream failure (a bad answer, retries spent) is recorded against the type and backs
        it off (`_type_failed`)."""
        try:
            await work
        except ForbiddenError as exc:
            record_type(self.mirror, rtype.name, exc, at=time.time())
            self.state.skipped(rtype.name)
            self.log.warning("job.type_forbidden", type=rtype.name, hint=exc.hint)
        except UpstreamError as exc:
            self._type_failed(rtype.name, exc)

    def _type_failed(self, name: str, exc: UpstreamError) -> None:
        """Type `name` failed (a job's part): its backoff grows, and `ccsync status` shows the
        error as its last."""
        delay = self.faults.failed(name, str(exc))
        if isinstance(exc, NoProgressError):
            self.running.metrics.no_progress.labels(listing=name).inc()
        self.log.warning("type.failed", type=name, error=str(exc), retry_in=round(delay, 2))
        record_type(self.mirror, name, exc, at=time.time())

    def _raise_failing(self, names: set[str]) -> None:
        """End a job run that went on past failing types by naming them (its outcome is then
        `error`, in `ccsync status` and `/healthz`)."""
        failing = sorted(n for n in names if n in self.faults.failing)
        if failing:
            raise SyncError(
                f"{', '.join(failing)} failing; the other types went on: "
                + "; ".join(f"{n}: {self.faults.failing[n].error}" for n in failing)
            )

    def ok(self, name: str) -> None:
        """Type `name` synced: fresh for health, its backoff over, recorded in the mirror."""
        self.state.synced(name)
        self.faults.succeeded(name)
        record_type(self.mirror, name, None, at=time.time())

    def malls(self) -> list[int]:
        return self.running.malls()
