"""The daemon's storage watch: degraded while the mirror cannot take writes, back by itself.

A storage fault (disk full, read-only, locked too long: `sync.store.faults`) met anywhere in
the daemon, a job, the queue worker or the webhook receiver's queue write, is `report`ed here.
The daemon is then degraded with that reason: one `storage.degraded` error line (never a
traceback), `/healthz` answers 503 naming it, `sync_degraded{reason}` is 1, `ccsync status`
says so, and the work that writes pauses: jobs skip their runs, the worker waits, and the
receiver answers 503 so that the upstream retries a delivery instead of counting it done. A
write check (`faults.write_check`) runs every `interval` seconds meanwhile; the first that commits
ends it (`storage.recovered`), and `on_resumed` runs (the daemon checks its webhook
subscriptions, which the upstream drops after 5 refused deliveries, and polls at once). While
healthy the check runs every `healthy_interval` seconds, so a full disk is reported even when
nothing else is writing.

`ccsync status` opens the mirror read-only and cannot ask the daemon; on a full disk the daemon
could not record its state in the mirror anyway. So the state goes to `<mirror>.health`, a
file written whole at start at a fixed size (`HEALTH_BYTES`) and then rewritten in place, which
needs no new block on a full disk; a clean stop removes it. A PostgreSQL mirror has no file
here: its watch is made from its `MirrorTarget` (the reports name the server, never its
password), keeps no health file, and a server gone is the fault `unreachable`, checked with the
same write check (`sync.store.pg.faults`) until it commits (issue #49).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sync.core.errors import StorageFault
from sync.core.logs import get_logger
from sync.core.target import MirrorTarget
from sync.model.stamps import iso_ms
from sync.store.faults import REASONS, storage_fault

if TYPE_CHECKING:  # the metrics module loads prometheus_client: the daemon's only
    from sync.core.metrics import Metrics

#: Seconds between write checks while degraded, and while healthy.
PROBE_INTERVAL = 5.0
HEALTHY_PROBE_INTERVAL = 30.0
#: How a fault's fix ends in the daemon's reports.
RESUMES = "and the daemon resumes by itself once a write succeeds"
#: The health file's fixed size: rewritten in place, it never needs a new block.
HEALTH_BYTES = 4096


def health_path(mirror: Path) -> Path:
    """`<mirror>.health`: the daemon's storage state, for `ccsync status`."""
    return mirror.with_name(mirror.name + ".health")


def read_health(mirror: Path) -> dict[str, Any] | None:
    """The state a running daemon wrote for `mirror`; None when no daemon is running (no
    file, or one left by a process that is gone) or the file cannot be read."""
    try:
        data = json.loads(health_path(mirror).read_bytes().strip() or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return None
    try:
        os.kill(data["pid"], 0)
    except ProcessLookupError:
        return None  # killed without its clean stop: nothing is running
    except PermissionError:
        pass  # alive, run by another user
    return data


class StorageWatch:
    """Whether the mirror takes writes; see the module docstring. `mirror`: the SQLite file,
    or the target (a file's, or a PostgreSQL schema's)."""

    def __init__(
        self,
        mirror: Path | MirrorTarget,
        *,
        metrics: Metrics | None = None,
        on_resumed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if isinstance(mirror, MirrorTarget):
            #: What the faults name: the file, or the server and schema (no password).
            self.path: Path | str = mirror.path if mirror.path is not None else mirror.describe()
        else:
            self.path = mirror
        #: The health file's mirror: a file's only.
        self._file = self.path if isinstance(self.path, Path) else None
        self.metrics = metrics
        self.interval = PROBE_INTERVAL
        self.healthy_interval = HEALTHY_PROBE_INTERVAL
        self.fault: StorageFault | None = None
        self.since: str | None = None
        self.on_resumed = on_resumed
        #: Set while the mirror takes writes; the worker waits on it.
        self.writable = asyncio.Event()
        self.writable.set()
        self.log = get_logger("sync.storage")
        self._fd: int | None = None
        self._began = 0.0
        self._other: str | None = None  # a check's failure that is no storage fault, logged once
        if metrics is not None:
            for reason in REASONS:
                metrics.degraded.labels(reason=reason).set(0)

    @property
    def degraded(self) -> bool:
        return self.fault is not None

    def report(self, exc: BaseException) -> StorageFault | None:
        """If `exc` is a storage fault, the daemon is degraded by it (one error line when that
        begins or its reason changes) and the fault is returned; otherwise None."""
        fault = storage_fault(exc, self.path, then=RESUMES)
        if fault is None:
            return None
        if self.fault is None or self.fault.reason != fault.reason:
            if self.fault is None:
                self._began = time.monotonic()
                self.since = iso_ms(time.time())
            self.fault = fault
            self.writable.clear()
            self.log.error(
                "storage.degraded",
                reason=fault.reason,
                file=fault.path,
                error=fault.cause,
                hint=fault.fix,
            )
            if self.metrics is not None:
                self.metrics.errors.labels(kind="StorageFault").inc()
                for reason in REASONS:
                    self.metrics.degraded.labels(reason=reason).set(int(reason == fault.reason))
            self._record()
        return fault

    def problem(self) -> str | None:
        """The line `/healthz` and `ccsync status` list first while degraded."""
        if self.fault is None:
            return None
        return f"storage {self.fault.reason} since {self.since}: {self.fault}"

    def snapshot(self) -> dict[str, Any] | None:
        """The fault for `/healthz` (None while healthy)."""
        if self.fault is None:
            return None
        return {
            "reason": self.fault.reason,
            "file": self.fault.path,
            "error": self.fault.cause,
            "fix": self.fault.fix,
            "since": self.since,
        }

    async def run(self, check: Callable[[bool], None], stop: asyncio.Event) -> None:
        """Check until `stop`: `check(degraded)` raises what a write raises now."""
        self._open()
        try:
            while not stop.is_set():
                wait = self.interval if self.fault is not None else self.healthy_interval
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                if stop.is_set():
                    return
                try:
                    check(self.fault is not None)
                except Exception as exc:
                    if self.report(exc) is None and str(exc) != self._other:
                        self._other = str(exc)
                        self.log.error("storage.check_failed", error=str(exc))
                    continue
                self._other = None
                if self.fault is not None:
                    await self._recovered()
        finally:
            self._close()

    async def _recovered(self) -> None:
        assert self.fault is not None
        self.log.info(
            "storage.recovered",
            reason=self.fault.reason,
            file=self.fault.path,
            after_s=round(time.monotonic() - self._began, 1),
        )
        self.fault = self.since = None
        self.writable.set()
        if self.metrics is not None:
            for reason in REASONS:
                self.metrics.degraded.labels(reason=reason).set(0)
        self._record()
        if self.on_resumed is not None:
            await self.on_resumed()

    # -- the health file -------------------------------------------------------------------------

    def _open(self) -> None:
        if self._file is None:
            return  # a server's mirror: `ccsync status` asks the server
        try:
            self._fd = os.open(health_path(self._file), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self.log.warning(
                "storage.health_file_unavailable",
                file=str(health_path(self._file)),
                error=exc.strerror,
                hint="`ccsync status` will not show the daemon's storage state",
            )
            return
        self._record()

    def _record(self) -> None:
        if self._fd is None:
            return
        state: dict[str, Any] = {"pid": os.getpid(), "status": "ok", "at": iso_ms(time.time())}
        if self.fault is not None:
            state.update(status="degraded", **(self.snapshot() or {}))
        body = json.dumps(state).encode()
        if len(body) > HEALTH_BYTES:  # a path of thousands of characters: the reason is enough
            body = json.dumps({k: state.get(k) for k in ("pid", "status", "reason")}).encode()
        with contextlib.suppress(OSError):  # best effort: the file is only a report
            os.pwrite(self._fd, body.ljust(HEALTH_BYTES), 0)

    def _close(self) -> None:
        if self._fd is None or self._file is None:
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)
            health_path(self._file).unlink()
        self._fd = None
