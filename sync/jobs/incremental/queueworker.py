"""The queue worker: turns durable webhook notices into fetches, writes and confirmed deletions.

Notices are hints, never data (the upstream does not sign them):
- an `updates` item makes the worker fetch the resource by `filter[id]` (batches of up to 100 ids
  per type and scope) and upsert what comes back;
- a `deletions` item removes a row only when `filter[id]` confirms the resource is gone upstream,
  so a forged notice can cost a request, never a row; ids the mirror does not hold cost nothing.

Items leave the queue only after the writes they caused have committed: a crash or `kill -9` in
between replays them, which is harmless because every write is an idempotent upsert or delete.
Items the upstream answers 403 or 404 for (a type the account may not read, a mall that is gone)
are dropped with a warning rather than retried: they would block the queue behind them for ever.

Each type drains in a lane of its own (one task per type with notices waiting), so a route that
answers badly holds up only its own type's notices: the failing type keeps them, backs off
(`sync.jobs.typefaults`: exponential, bounded) and is reported, while the other lanes go on. While
the mirror cannot take writes (`sync.store.watch`) no lane starts; one that meets the fault ends
with its notices kept, and the worker waits until a write succeeds again.
Fetching by id is `sync.jobs.evidence`'s. Mall-scoped types need a mall for `filter[id]`; the rows a
notice names that the mirror does not hold yet (creations) are looked for, all of a batch
together, through the malls' linkage or in recently active malls (`sync.jobs.malls.mallincludes`);
what a type polled per mall cannot place that way is caught by a poll of the type in every
mall (`Poller.poll_type`).

The worker holds what it works with (mirror, queue, evidence, members, poller, the type faults
and the storage watch), given in its constructor; it records a failing type in the mirror
itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import structlog

from sync.channel.budget import Priority, current_priority
from sync.core import tally
from sync.core.errors import ForbiddenError, NotFoundError, UpstreamError
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.freshness import OnLag, changed_lags
from sync.jobs.incremental.poll import Poller
from sync.jobs.malls.mallincludes import PER_MALL, refused
from sync.jobs.typefaults import TypeFaults, record_type
from sync.model.catalogue import ResourceType
from sync.model.scopes import scopes_of
from sync.model.stamps import iso_ms
from sync.store import MirrorStore
from sync.store.queue import TAKE_IDS, QueueItem
from sync.store.seamparts import ChangeQueuePart
from sync.store.watch import StorageWatch

#: The worker looks at the queue at least this often (items left by a crash, a backoff ended).
LOOK_EVERY = 1.0
#: Seconds between two `worker.summary` lines at most (`tally.Summary`).
SUMMARY_EVERY = 10.0


class Located(Protocol):
    """What the worker asks of the mall members' fast path (`MallIncludes`, or a test's fake):
    where rows the mirror lacks are (`locate`), noting a mall's activity, its fallback."""

    def touch(self, mall_id: int) -> None: ...

    async def locate(self, rtype: ResourceType, ids: Iterable[int]) -> set[int]: ...

    def fall_back(self, reason: str) -> None: ...

    def mode(self, rtype: ResourceType) -> str: ...


class QueueWorker:
    """Drains the change queue; `wake()` after enqueueing, `run(stop)` until stopped."""

    def __init__(
        self,
        mirror: MirrorStore,
        queue: ChangeQueuePart,
        evidence: Evidence,
        types: Sequence[ResourceType],
        *,
        members: Located,
        poller: Poller,
        concurrency: int,
        faults: TypeFaults,
        storage: StorageWatch,
        batch_delay: float = 0.05,
        on_lag: OnLag | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.on_lag = (
            on_lag  # the changes notices commit, and how late (`sync.jobs.incremental.freshness`)
        )
        self.now = now  # the upstream's clock (`UpstreamClock.now_ts`), for `on_lag`
        self.mirror = mirror
        self.queue = queue
        self.evidence = evidence
        self.types = {t.name: t for t in types}
        self.members = members
        self.poller = poller
        self.concurrency = concurrency
        self.faults = faults
        self.storage = storage
        self.batch_delay = batch_delay
        self._wake = asyncio.Event()
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self.log = get_logger("sync.worker")
        self._drained = tally.Summary(SUMMARY_EVERY)  # the `worker.summary` line's figures
        self.processed = 0
        self.last_error: str | None = None

    def wake(self) -> None:
        """Called by the receiver after a notice is committed to the queue."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Start a lane for every type with notices waiting, whenever woken (and every
        `LOOK_EVERY` seconds, for items left by a crash or a type whose backoff ended).
        Its requests go first in the request budget: someone is waiting for a change."""
        current_priority.set(Priority.WEBHOOK)  # this task's own context, which lanes copy
        try:
            while not stop.is_set():
                due = self.faults.next_due()
                wait = LOOK_EVERY if due is None else min(LOOK_EVERY, max(due, 0.01))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                self._wake.clear()
                if stop.is_set():
                    return
                if self.storage.degraded:
                    await self._writable(stop)
                    continue
                if self.batch_delay:
                    await asyncio.sleep(self.batch_delay)  # let close notices join one batch
                self._start_lanes()
                self._log_summary()
        finally:
            self._log_summary(force=True)
            lanes = list(self._lanes.values())
            for lane in lanes:
                lane.cancel()
            await asyncio.gather(*lanes, return_exceptions=True)

    async def _writable(self, stop: asyncio.Event) -> None:
        """Wait until the mirror takes writes again (`sync.store.watch`) or `stop`."""
        waits = [
            asyncio.ensure_future(self.storage.writable.wait()),
            asyncio.ensure_future(stop.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        self._wake.set()  # look at the queue at once

    def _start_lanes(self) -> None:
        pending = {*self.queue.types_pending("update"), *self.queue.types_pending("deletion")}
        for name in sorted(pending):
            if name not in self._lanes and self.faults.due(name):
                self._lanes[name] = asyncio.create_task(self._lane(name), name=f"worker:{name}")

    async def _lane(self, type_name: str) -> None:
        """Drain one type's notices; a failure stays this type's (see the module docstring)."""
        try:
            await self.drain_type(type_name)
        except UpstreamError as exc:
            self.last_error = str(exc)
            delay = self.faults.failed(type_name, str(exc))
            self.log.warning(
                "worker.type_failed", type=type_name, error=str(exc), retry_in=round(delay, 2)
            )
            self._record(type_name, exc)
        except Exception as exc:
            if self.storage.report(exc) is not None:
                return  # its notices stay queued; `run` waits until writes succeed again
            # A bug, not a fault of the upstream or the disk: shown whole, and the type backs
            # off like a failing one instead of being retried at every look.
            self.faults.failed(type_name, f"{type(exc).__name__}: {exc}")
            self.log.exception("worker.lane_crashed", type=type_name)
        else:
            self.faults.succeeded(type_name)
        finally:
            self._lanes.pop(type_name, None)
            self._wake.set()  # notices that came while this lane ran, or another lane's turn

    def _record(self, type_name: str, exc: UpstreamError) -> None:
        """`ccsync status` shows the error as the type's last."""
        try:
            record_type(self.mirror, type_name, exc, at=time.time())
        except Exception as err:  # recording it is a write: the mirror may not take it
            if self.storage.report(err) is None:
                raise

    async def drain_type(self, type_name: str) -> int:
        """Process every queued notice of one type (updates, then deletions); returns how many
        were handled. An `UpstreamError` keeps the batch it failed for and is raised."""
        handled = 0
        rtype = self.types.get(type_name)
        structlog.contextvars.bind_contextvars(type=type_name)  # this lane's own context
        counted, token = tally.start()  # the requests on this lane's `worker.drained` line
        try:
            handled = await self._drain(type_name, rtype)
        finally:
            tally.stop(token)
        if handled and rtype is not None:
            # The mirror took this type's changes now: its lag in `ccsync status` counts from
            # here, not from the last poll (a webhook change lands long before the next one).
            self.mirror.types.took_change(type_name, at=iso_ms(time.time()))
        if handled:
            self.log.debug(
                "worker.drained",
                type=type_name,
                notices=handled,
                requests=counted.requests,
                queue_depth=self.queue.depth(),
            )
            self._drained.add(type_name, notices=handled, requests=counted.requests)
            self._log_summary()
        return handled

    def _log_summary(self, *, force: bool = False) -> None:
        """At `info`, one `worker.summary` per `SUMMARY_EVERY` s at most: the notices applied
        and requests sent per type since the last (each batch's `worker.drained` is at debug)."""
        sums = self._drained.take(force=force)
        if sums:
            self.log.info(
                "worker.summary",
                notices=sum(f.get("notices", 0) for f in sums.values()),
                requests=sum(f.get("requests", 0) for f in sums.values()),
                types={name: f.get("notices", 0) for name, f in sums.items()},
                queue_depth=self.queue.depth(),
            )

    async def _drain(self, type_name: str, rtype: ResourceType | None) -> int:
        """Take the type's lanes in turn (`ChangeQueue.take`: a batch from each delivery), so
        one giant batch never holds up a small delivery behind it. What an earlier lane of the
        type left taken (ended by a storage fault or a bug) is waiting again first."""
        handled = 0
        self.queue.release(type_name)
        while items := self.queue.take(type_name, limit=TAKE_IDS):
            kind = items[0].kind
            if rtype is None:
                self.queue.ack(items)  # a type we do not mirror: acknowledged, ignored
                continue
            structlog.contextvars.bind_contextvars(notice_kind=kind)
            try:
                await self._process(kind, rtype, items)
            except (ForbiddenError, NotFoundError) as exc:
                # A final answer: no retry can help, and keeping the items would stall
                # every notice of this type queued behind them. Polls and the reconcile
                # converge.
                self.log.warning(
                    "worker.notices_dropped",
                    type=type_name,
                    notices=len(items),
                    error=str(exc),
                )
            except UpstreamError as exc:
                self.queue.fail(items, str(exc))
                raise
            self.queue.ack(items)
            handled += len(items)
            self.processed += len(items)
        return handled

    async def _process(self, kind: str, rtype: ResourceType, items: Sequence[QueueItem]) -> None:
        ids = sorted({i.resource_id for i in items})
        if rtype.level == "top":
            await self._apply(kind, rtype, None, ids)
            return
        if kind != "update":
            await self._left_malls(rtype, ids)
            return
        by_mall: dict[int, list[int]] = {}
        unknown: list[int] = []
        for rid in ids:
            row = self.mirror.table(rtype.name).get(rid)
            if row is not None and row.get("mall_id") is not None:
                by_mall.setdefault(int(row["mall_id"]), []).append(rid)
            else:
                unknown.append(rid)
        for mall_id, mall_ids in by_mall.items():
            self.members.touch(mall_id)  # recent activity: creations are looked for here first
            await self._apply(kind, rtype, mall_id, mall_ids)
        if unknown:
            await self._locate(rtype, unknown)  # new rows: their malls are not known yet

    async def _locate(self, rtype: ResourceType, ids: list[int]) -> None:
        """Rows of a mall-scoped type the mirror does not hold (creations announced by
        webhooks): found through the malls' linkage, or by `filter[id]` in the malls most
        likely to hold them (`MallIncludes.locate`: `LOCATE_MALLS` at most). What is still not
        found is left to the type's next scheduled poll, which reads every mall anyway: a
        creation costs a few requests, never a walk of every mall (#47)."""
        try:
            found = await self.members.locate(rtype, ids)
        except UpstreamError as exc:
            if not refused(exc):
                raise
            self.members.fall_back(f"GET /malls?include= answered {exc.status} (locate)")
            found = set()
        if len(found) < len(set(ids)) and self.members.mode(rtype) == PER_MALL:
            self.log.debug(
                "worker.located_by_poll",
                type=rtype.name,
                ids=sorted(set(ids) - found)[:20],
                hint="not in the malls asked: the next poll of every mall finds them",
            )

    async def _left_malls(self, rtype: ResourceType, ids: Sequence[int]) -> None:
        """A deletion notice for a mall-scoped row: asked by `filter[id]` in each of its malls;
        a mall that no longer serves it loses the membership. The row itself goes only on
        evidence that no mall lists it: the deletions feed, or the reconcile's `filter[id]` in
        every mall (a store that moved malls must not be deleted by its old mall's notice)."""
        left = await self.evidence.leave_malls(rtype, ids)
        if left:
            self.log.info("worker.left_malls", type=rtype.name, memberships=left)

    async def _apply(
        self, kind: str, rtype: ResourceType, mall_id: int | None, ids: Sequence[int]
    ) -> None:
        scopes = scopes_of(rtype, [mall_id] if mall_id is not None else [])
        if kind == "update":
            before = self.mirror.table(rtype.name).stamps(ids) if self.on_lag else {}
            await self.evidence.fetch_and_write(scopes, ids)
            if self.on_lag is not None:
                after = self.mirror.table(rtype.name).stamps(ids)
                now = self.now()
                self.on_lag(rtype.name, "notice", changed_lags(before, after, now))
            return
        held = [i for i in ids if self.mirror.table(rtype.name).get(i) is not None]
        if held:
            removed = await self.evidence.confirm_and_delete(scopes, held)
            if removed < len(held):
                self.log.warning(
                    "worker.deletion_not_confirmed",
                    type=rtype.name,
                    notices=len(held),
                    deleted=removed,
                    hint="the upstream still serves these ids; the notices were ignored",
                )
