"""Parse and stage backfill pages in worker processes, so the main process only downloads and writes.

A backfill page costs ~3-5 ms of CPU to parse (`orjson.loads` of 250-600 KB), validate and
stage, and ~1-2 ms to write. In one process, with the GIL, that is one core for everything (a
writer *thread* was tried: the GIL convoys between parsing and writing). With `[backfill]
parse_workers = 1`, the default, a worker process on the second core takes the parse and stage
and hands back plain row tuples (~40 KB a page in `marshal` form, ~0.1 ms each way), and the
main process keeps the HTTP client, the SQLite connection and every decision (what is committed, the
included-row memo, tombstones, checkpoints). A worker's only state is which included rows the
main process reported written (`written`), so that it stops sending copies of them
(`sync.pipeline.seen.Sent`); it only saves work, so a killed run resumes exactly as before.

A worker is a `python` running `sync.pipeline.pageworker.worker_main`, fed page bodies on its stdin
(`sync.pipeline.pageworker.REQUEST`) and answering in order on its stdout. Not `multiprocessing`: its spawn
start re-runs the caller's main script in every worker (a program embedding `sync` without a
`__main__` guard would run twice), and its workers import much more. Robustness:
- A worker imports only the staging code (orjson and the catalogue, ~18 MB).
- It ignores SIGINT and SIGTERM (Ctrl-C and `systemctl stop` reach the whole process group):
  it exits when its stdin closes, which also happens when the main process dies (`kill -9`).
- If a worker dies (out of memory, killed), the pool logs it once and stages in-process from
  then on; the pages it held are staged again, so nothing is lost.
- A page that is not a JSON:API collection raises the same `BadResponseError` as the client's
  `list_page`, with the URL and status (the refusal comes back as a value, not a pickled
  exception).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import pickle
import struct
import sys
import termios
from collections import deque
from types import TracebackType

from sync.core.errors import BadResponseError
from sync.core.logs import get_logger
from sync.pipeline.batches import StagedPage
from sync.pipeline.pageworker import (
    ANSWER,
    PROTOCOL,
    REQUEST,
    Refused,
    from_wire,
    stage_request,
)
from sync.pipeline.seen import Seen


def _widen_pipes(proc: asyncio.subprocess.Process) -> None:
    """Grow both pipes to 1 MiB (Linux), so a whole page goes in one write.

    With the default 64 KiB the event loop has to come back ten times to feed one page, and
    it does not while the main process is inside a SQLite write: the worker would sit idle.
    """
    pipes = [proc.stdin.get_extra_info("pipe") if proc.stdin else None]
    transport = getattr(proc.stdout, "_transport", None)  # a StreamReader has no extra info
    if transport is not None:
        pipes.append(transport.get_extra_info("pipe"))
    for pipe in pipes:
        if pipe is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
            with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: keep 64 KiB
                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)


#: Seconds without an answer after which a worker counts as stuck.
STALL_SECONDS = 60.0


class _WorkerGone(Exception):
    """The worker process exited or its pipe broke; the page is staged in-process instead."""


class _Worker:
    """One worker process (`sync.pipeline.pageworker.worker_main`) and the answers it owes, in order."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: deque[asyncio.Future[StagedPage | Refused]] = deque()
        self.gone = False
        self.error = ""
        self.written: list[int] = []  # tickets of its pages written since its last request
        transport = getattr(proc.stdout, "_transport", None)
        pipe = transport.get_extra_info("pipe") if transport is not None else None
        self._answers_fd: int | None = pipe.fileno() if pipe is not None else None
        self.reader = asyncio.ensure_future(self._read())

    def answered(self) -> bool:
        """Whether an answer is waiting to be read, in the reader's buffer or the pipe: the worker
        is then ahead of this process (busy writing), whatever `waiting` says."""
        if self.proc.stdout is not None and len(getattr(self.proc.stdout, "_buffer", b"")):
            return True
        if self._answers_fd is None:
            return False
        try:
            ready = fcntl.ioctl(self._answers_fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return False
        return bool(struct.unpack("i", ready)[0])

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                (size,) = ANSWER.unpack(await self.proc.stdout.readexactly(ANSWER.size))
                result = from_wire(await self.proc.stdout.readexactly(size))
                fut = self.waiting.popleft()
                if not fut.done():  # a cancelled caller still had its page staged
                    fut.set_result(result)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.gone = True
            while self.waiting:
                fut = self.waiting.popleft()
                if not fut.done():
                    fut.set_exception(_WorkerGone())

    async def stage(self, meta: bytes, body: bytes) -> StagedPage | Refused:
        if self.gone:
            raise _WorkerGone()
        assert self.proc.stdin is not None
        fut: asyncio.Future[StagedPage | Refused] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        try:
            self.proc.stdin.write(REQUEST.pack(len(meta), len(body)) + meta)
            self.proc.stdin.write(body)  # as it came, not copied into a pickle
            await self.proc.stdin.drain()
        except (ConnectionError, RuntimeError):
            raise _WorkerGone() from None
        try:
            # A page takes milliseconds; a worker silent this long is stuck: stop it, and its
            # pages (this one and those queued behind it) are staged in-process instead.
            return await asyncio.wait_for(asyncio.shield(fut), STALL_SECONDS)
        except TimeoutError:
            fut.cancel()
            self.error = f"no answer in {STALL_SECONDS:.0f} s"
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            raise _WorkerGone() from None
        except asyncio.CancelledError:
            fut.cancel()  # its answer still comes, in order, and is dropped
            raise

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 5.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


class PagePool:
    """Stages listing pages in `workers` processes (0: in this process). Use as a context."""

    def __init__(self, workers: int, *, here_at: int = 0) -> None:
        self.workers = workers
        #: Pages waiting at every worker from which the next page is staged here instead
        #: (0: never while a worker runs). See `stage`.
        self.here_at = here_at
        #: The writer's memo of included rows (`Mirror.included_memo`): a page staged here
        #: leaves out the copies it holds, as a worker leaves out those it was told of
        #: (`written`).
        self.memo: Seen | None = None
        #: Pages staged in this process (balance, or no worker).
        self.staged_here = 0
        self._procs: list[_Worker] = []
        self._warned = False
        self._tickets: dict[int, _Worker] = {}  # staged, not yet reported written
        self._next_ticket = 0

    @property
    def running(self) -> bool:
        """Whether a worker process is staging pages (else they are staged in this one)."""
        return any(not w.gone for w in self._procs)

    async def __aenter__(self) -> PagePool:
        if self.workers > 0 and sys.executable:
            for _ in range(self.workers):
                try:
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-c",
                        f"from sync.pipeline.pageworker import worker_main; worker_main({PROTOCOL})",
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE,
                    )
                except OSError as exc:
                    self._lost(f"cannot start a page worker: {exc}")
                    break
                _widen_pipes(proc)
                self._procs.append(_Worker(proc))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the workers: each finishes the page it holds and exits on end of input."""
        procs, self._procs = self._procs, []
        for w in procs:
            await w.close()

    def _lost(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            get_logger("sync.pagepool").warning(
                "pagepool.worker_lost",
                reason=why,
                hint="staging pages in the main process from now on (slower, nothing lost); "
                "check memory limits if this repeats",
            )

    async def stage(
        self,
        type_name: str,
        body: bytes,
        *,
        number: int,
        url: str,
        status: int,
        mall_id: int | None,
        skip: tuple[str, ...] = (),
    ) -> StagedPage:
        """Parse, validate and stage one listing page (see `sync.pipeline.staging.stage_listing`).

        In a worker; or here, when every worker already has `here_at` pages waiting and none
        has an answer ready. At 200k resources a worker stages a page in ~2.2 ms and the main
        process writes it in under 1 ms, so with every page sent to the worker the main
        process idled a third of the time while the worker's queue grew: taking the odd page
        itself when the queue is long keeps both cores busy. At 1M the writes grow (deeper
        B-trees, more checkpointing) and this process is the busier one: its unread answers
        then keep `waiting` long although the worker is idle, so an answer ready means the
        page goes to the worker. A worker is never left without pages queued, so it never
        waits for one staged here.
        """
        result: StagedPage | Refused | None = None
        live = [w for w in self._procs if not w.gone]
        if self._procs and not live:
            dead = self._procs[0]
            self._lost(f"the page workers exited ({dead.error or f'code {dead.proc.returncode}'})")
        if (
            live
            and self.here_at
            and min(len(w.waiting) for w in live) >= self.here_at
            and not any(w.answered() for w in live)
        ):
            live = []  # every worker is backed up: this page is staged here
        if live:
            worker = min(live, key=lambda w: len(w.waiting))
            self._next_ticket += 1
            ticket = self._next_ticket
            if len(self._tickets) > 4096:  # pages dropped unwritten: their rows are sent again
                self._tickets.clear()
            self._tickets[ticket] = worker
            written, worker.written = worker.written, []
            try:
                meta = pickle.dumps((type_name, number, status, mall_id, skip, ticket, written))
                result = await worker.stage(meta, body)
            except _WorkerGone:
                self._lost(f"a page worker stopped answering ({worker.error or 'it exited'})")
        if result is None:
            self.staged_here += 1
            result = stage_request((type_name, body, number, status, mall_id, skip), self.memo)
        if isinstance(result, Refused):
            raise BadResponseError(result.message, url=url, status=status, hint=result.hint)
        return result

    def written(self, page: StagedPage) -> None:
        """Report `page` written to the mirror: its worker may now leave out its included rows
        from later pages (`sync.pipeline.seen.Sent`). Call it only once the write succeeded."""
        worker = self._tickets.pop(page.ticket, None) if page.ticket else None
        if worker is not None and not worker.gone:
            worker.written.append(page.ticket)
