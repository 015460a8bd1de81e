"""Active and standby: two `ccsync run` on one PostgreSQL mirror, one of them writing (issue #49).

Before a daemon whose mirror is in PostgreSQL opens anything that writes, it takes the mirror's
active lock (`sync.store.pg.lock.ActiveLock`, a session advisory lock: read its docstring for
the takeover arithmetic). `Standby.acquire` waits for it:

- **While another holds it** the daemon is a *standby*: `/healthz` answers 200 with `status:
  standby`, `ready: false` and the holder (`report`); systemd hears `READY=1` (the process has
  started: a standby may wait for days, past any start timeout), `STATUS=standby: active is ...`,
  and the watchdog is fed; one `daemon.standby` line names the holder (again only when another
  takes its place). The lock's session holds the standbys' key meanwhile, so `ccsync status` on
  the mirror lists it (`ActiveLock.standbys`). Every `POLL` seconds it asks again; SIGTERM ends
  the wait at once (exit 0).
- **A server it cannot reach** (or a replica during a failover) is retried as a lost upstream
  is: logged once per distinct message (`daemon.standby_unreachable`), `/healthz` 503
  `degraded` with reason `unreachable`, asked again after `retry_delay` (2 s doubling to 30 s).
  A setting the server refuses (`MirrorRefused`: a password, a right, a database that does not
  exist) ends the daemon with its one line, as a refused login does: asking again changes
  nothing.
- **Once the lock is ours**, one `daemon.active` line, and the daemon opens its running parts
  with the lock (the mirror fences each write transaction with it) and resumes from the
  mirror's own checkpoints, as any start does.

While active, `keep` asks `ActiveLock.held` every `CHECK` seconds (in a thread: on a cut
network the answer takes up to the client's TCP user timeout, and the event loop must go on
serving `/healthz` meanwhile). When it answers no (the server ended our session, the network
dropped it) the daemon stops writing at once and waits as a standby again, in the same
process (`sync.daemon.service`): a lost server is retried, not an exit, and a page already in
flight cannot commit (the mirror's fence refuses it).

The lock's calls are short round trips made in a worker thread, one at a time: a connect to a
black-holed host takes `CONNECT_TIMEOUT`, and neither `/healthz` nor SIGTERM waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from sync.core.config import WebhookSettings
from sync.core.errors import MirrorError, MirrorRefused
from sync.core.logs import get_logger
from sync.core.target import MirrorTarget
from sync.daemon.http import make_standby_app, serve
from sync.daemon.schedule import doubling
from sync.daemon.systemd import Notifier, watchdog_loop
from sync.model.stamps import iso_ms
from sync.store.faults import UNREACHABLE

if TYPE_CHECKING:  # psycopg is loaded only for a PostgreSQL mirror; prometheus for metrics
    from sync.core.metrics import Metrics
    from sync.store.pg.lock import ActiveLock

#: Seconds between a standby's tries, and between the active daemon's checks: the lock's
#: (`sync.store.pg.lock.POLL`, `CHECK`), repeated here so that an SQLite daemon loads no psycopg.
POLL = 2.0
CHECK = 2.0
#: Seconds before a standby that could not reach the server asks again: the first wait, and
#: the most it grows to (doubling per failure in a row).
RETRY_S = (2.0, 30.0)


def retry_delay(failures: int) -> float:
    """The wait after `failures` failed tries in a row: 2 s doubling to 30 s."""
    return doubling(failures, *RETRY_S)


def active_lock(target: MirrorTarget) -> ActiveLock:
    """The active lock of the PostgreSQL mirror `target` names (psycopg loaded only here)."""
    from sync.store.pg.lock import ActiveLock

    assert target.url is not None
    return ActiveLock(target.url, target.schema)


class Standby:
    """The wait for the active lock of one mirror, and what a waiting daemon reports; see the
    module docstring. `make_lock` builds the lock (the real one unless a test says)."""

    def __init__(
        self,
        target: MirrorTarget,
        *,
        notifier: Notifier | None = None,
        make_lock: Callable[[MirrorTarget], ActiveLock] = active_lock,
        poll: float = POLL,
        check: float = CHECK,
    ) -> None:
        self.target = target
        self.notifier = notifier or Notifier()
        self.make_lock = make_lock
        self.poll = poll
        self.check = check
        self.log = get_logger("sync.daemon")
        #: Whether the daemon waits now (the report is `standby`'s), and since when.
        self.waiting = False
        self.since: str | None = None
        #: The holder's description while another holds the lock; None when free or unknown.
        self.active: str | None = None
        #: Why the server could not be asked, while it cannot (one line, no password).
        self.problem: str | None = None
        self._holder_pid: int | None = None
        self._began = 0.0

    # -- what it reports -----------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """`/healthz` while waiting: `standby` (200) naming the holder, or `degraded` (503)
        with reason `unreachable` while the server cannot be asked."""
        problems = [] if self.problem is None else [self.problem]
        return {
            "status": "standby" if self.problem is None else "degraded",
            "role": "standby",
            "reason": None if self.problem is None else UNREACHABLE,
            "ready": False,
            "active": self.active,
            "standby_since": self.since,
            "mirror": self.target.describe(),
            "problems": problems,
        }

    def status_line(self) -> str:
        """What systemd's STATUS shows while waiting."""
        if self.problem is not None:
            return f"standby: the mirror cannot be reached: {self.problem}"
        return f"standby: active is {self.active or '(the lock is free)'}"

    # -- waiting -------------------------------------------------------------------------------

    async def wait(
        self,
        stop: asyncio.Event,
        webhooks: WebhookSettings,
        health: Callable[[], dict[str, Any]],
        metrics: Metrics | None = None,
    ) -> ActiveLock | None:
        """`acquire`, serving the standby app (`sync.daemon.http.make_standby_app`: `health`
        on `/healthz`) on `[webhooks] listen` when webhooks are on, and feeding the watchdog
        meanwhile; the listener is closed before the lock is returned."""
        self.notifier.ready()  # started: a standby may wait past any start timeout
        watchdog = asyncio.create_task(watchdog_loop(self.notifier, lambda: True))
        runner: web.AppRunner | None = None
        try:
            if webhooks.enabled:
                app = make_standby_app(health, metrics=metrics)
                runner, port = await serve(app, webhooks.host, webhooks.port)
                self.log.info(
                    "receiver.listening", listen=f"{webhooks.host}:{port}", role="standby"
                )
            return await self.acquire(stop)
        finally:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
            if runner is not None:
                await runner.cleanup()

    async def acquire(self, stop: asyncio.Event) -> ActiveLock | None:
        """The lock, once ours; None when `stop` is set first (it ends the wait at once, and
        a lock taken meanwhile is released)."""
        lock = self.make_lock(self.target)
        self.waiting, self.since, self._began = True, iso_ms(time.time()), time.monotonic()
        self.active = self.problem = None
        self._holder_pid = None
        failures = 0
        try:
            while not stop.is_set():
                try:
                    took = await _off_loop(self._try, lock, stop)
                    if took is None:
                        return None  # stopped mid-try: the try releases the lock when it ends
                    if took and not stop.is_set():
                        self._took(lock)
                        return lock
                    if took:
                        break  # taken as SIGTERM came: given up again below
                    failures, wait = 0, self.poll
                except MirrorRefused:
                    raise  # a setting to fix: asking again changes nothing (the daemon exits)
                except MirrorError as exc:
                    failures += 1
                    wait = retry_delay(failures)
                    self._unreachable(str(exc), wait)
                except asyncio.CancelledError:
                    raise
                self.notifier.status(self.status_line())
                await _sleep_unless(stop, wait)
            lock.release()  # pg: nothing held but the standbys' key; closes the session
            return None
        finally:
            self.waiting = False

    def _try(self, lock: ActiveLock) -> bool:
        """One try (in a worker thread): take the lock, else stand by and learn the holder."""
        if lock.try_acquire():
            return True
        lock.stand_by()
        holder = lock.holder()
        self.problem = None
        if holder is None:
            self.active = None  # freed since: the next try takes it
        elif holder.pid != self._holder_pid:
            self._holder_pid = holder.pid
            self.active = holder.describe()
            self.log.info(
                "daemon.standby",
                active=self.active,
                mirror=self.target.describe(),
                hint="another daemon holds the mirror's active lock; this one takes over "
                "when it stops",
            )
        return False

    def _unreachable(self, message: str, retry_in: float) -> None:
        if message != self.problem:
            self.log.error(
                "daemon.standby_unreachable",
                error=message,
                retry_in=retry_in,
                hint="the daemon keeps asking; it becomes active or standby once it can",
            )
        self.problem = message

    def _took(self, lock: ActiveLock) -> None:
        self.problem = None
        self.log.info(
            "daemon.active",
            lock=lock.status(),
            mirror=self.target.describe(),
            waited_s=round(time.monotonic() - self._began, 1),
            previous=self.active,
        )
        self.active = None

    # -- keeping it ----------------------------------------------------------------------------

    async def keep(
        self,
        lock: ActiveLock,
        on_lost: Callable[[], None],
        connection_lost: Callable[[], bool] = lambda: False,
    ) -> None:
        """While the daemon is active: `lock.held()` every `check` seconds; the first no calls
        `on_lost` (after one `daemon.lock_lost` line) and returns. So does the mirror's own
        connection found gone for good (`connection_lost`, `StoragePart.lost`: the server ended
        that session alone): no write can succeed on it, and the next term reopens the mirror
        (one `daemon.connection_lost` line). Runs until cancelled."""
        while True:
            await asyncio.sleep(self.check)
            if connection_lost():
                self.log.error(
                    "daemon.connection_lost",
                    mirror=self.target.describe(),
                    hint="the server ended the mirror's connection: the daemon lets the lock "
                    "go and opens the mirror again",
                )
                on_lost()
                return
            if not await asyncio.to_thread(lock.held):
                self.log.error(
                    "daemon.lock_lost",
                    mirror=self.target.describe(),
                    hint="the session holding the mirror's active lock ended (the server "
                    "restarted, or the network dropped it): writing stops now and the daemon "
                    "waits as a standby",
                )
                on_lost()
                return


async def _off_loop(
    fn: Callable[[ActiveLock], bool], lock: ActiveLock, stop: asyncio.Event
) -> bool | None:
    """`fn(lock)` in a worker thread, raced with `stop`: None at once when `stop` wins; the
    abandoned try, when it ends (within the connect timeout), releases the lock."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, lock))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not work.done():
        work.add_done_callback(lambda task: _abandoned(task, lock))
        return None
    return work.result()


def _abandoned(task: asyncio.Future[bool], lock: ActiveLock) -> None:
    """An abandoned try has ended: its outcome retrieved (asyncio logs none) and the lock,
    taken or not, released (the same thread-free moment: the try no longer uses it)."""
    if not task.cancelled():
        task.exception()
    lock.release()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
