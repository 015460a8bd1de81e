"""Parse and stage backfill pages in worker processes, so the main process only downloads and writes.

A backfill page costs ~5-8 ms of CPU to parse (`orjson.loads` of 250-600 KB), validate and
stage, and ~2-3 ms to write. In one process, with the GIL, that is one core for everything (a
writer *thread* was tried: the GIL convoys between parsing and writing). With `[backfill]
parse_workers = 1`, the default, a worker process on the second core takes the parse and stage
and hands back plain lists (ids, one JSON document per row, links; ~90 KB pickled a page,
~0.1 ms each way), and the main process keeps the HTTP client, the SQLite connection and every
decision (what is committed, the included-row memo, tombstones, checkpoints): a worker holds no
state, so a killed run resumes exactly as before.

Robustness:
- Workers are spawned (never forked from a process with an event loop and threads) and import
  only the staging code (orjson, the catalogue), ~18 MB each.
- They ignore SIGINT and SIGTERM (Ctrl-C and `systemctl stop` reach the whole process group):
  the main process decides when to stop, then shuts the pool down.
- A worker whose parent died (`kill -9`) exits within a second instead of lingering.
- If a worker dies (out of memory, killed), the pool logs it once and stages in-process from
  then on; the page being staged is staged again, so nothing is lost.
- A page that is not a JSON:API collection raises the same `BadResponseError` as the client's
  `list_page`, with the URL and status (exceptions are carried back as values, not pickled).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType

from sync.errors import BadResponseError
from sync.staging import StagedPage, stage_listing


@dataclass(frozen=True)
class _Refused:
    """A page `stage_listing` refused, carried back from a worker as a value."""

    message: str
    hint: str | None


def _stage_in_worker(
    type_name: str, body: bytes, number: int, url: str, status: int, mall_id: int | None
) -> StagedPage | _Refused:
    try:
        return stage_listing(
            type_name, body, number=number, url=url, status=status, mall_id=mall_id
        )
    except BadResponseError as exc:
        return _Refused(exc.message, exc.hint)  # url "" keeps the message bare


def _worker_init(parent: int) -> None:
    """Ignore the signals meant for the main process; exit when the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    bulk_gc()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def bulk_gc() -> None:
    """Tune the cycle collector for bulk parsing.

    Parsing a page allocates tens of thousands of dicts and lists that reference counting
    frees (JSON has no cycles), yet every 700 allocations trigger a collection that walks
    the young objects, and the oldest generation is walked again and again as it grows. Fewer
    collections cut ~20 % of a backfill's CPU; what exists at start-up is frozen out of them.
    """
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


class PagePool:
    """Stages listing pages in `workers` processes (0: in this process). Use as a context."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._broken = False

    async def __aenter__(self) -> PagePool:
        if self.workers > 0:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(os.getpid(),),
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (pages still queued are dropped: nothing waits for them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def stage(
        self,
        type_name: str,
        body: bytes,
        *,
        number: int,
        url: str,
        status: int,
        mall_id: int | None,
    ) -> StagedPage:
        """Parse, validate and stage one listing page (see `sync.staging.stage_listing`)."""
        result: StagedPage | _Refused | None = None
        if self._pool is not None and not self._broken:
            loop = asyncio.get_running_loop()
            try:
                result = await loop.run_in_executor(
                    self._pool, _stage_in_worker, type_name, body, number, "", status, mall_id
                )
            except BrokenProcessPool:
                if not self._broken:
                    from sync.logs import get_logger  # here: workers import this module lean

                    self._broken = True
                    get_logger("sync.pagepool").warning(
                        "pagepool.worker_died",
                        hint="staging pages in the main process from now on; "
                        "check memory limits if this repeats",
                    )
                with contextlib.suppress(Exception):
                    self._pool.shutdown(wait=False, cancel_futures=True)
        if result is None:
            result = _stage_in_worker(type_name, body, number, "", status, mall_id)
        if isinstance(result, _Refused):
            raise BadResponseError(result.message, url=url, status=status, hint=result.hint)
        return result
