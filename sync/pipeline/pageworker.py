"""The page worker: a process that stages listing pages fed to it on a pipe, and the pipe's format.

A backfill hands raw page bodies to one or more of these (`sync.pipeline.pagepool`), so that
parsing and staging (`sync.pipeline.staging.stage_listing`) run on another core while the main
process downloads and writes. A request is (length of the pickled (type, page number, status,
mall id, skip, ticket, tickets written since the last request), length of the body), then those
two; an answer is its length, then the `StagedPage` or `Refused` in `marshal` form (`to_wire`).
The worker's only state is its memo of the included rows the main process wrote
(`sync.pipeline.seen.Sent`). A page the worker cannot stage comes back as a `Refused` value,
never as a pickled exception.

Started as `python -c "from sync.pipeline.pageworker import worker_main; worker_main(<PROTOCOL>)"`,
it imports only this module and what staging needs (orjson, msgspec, the catalogue).
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import pickle
import signal
import struct
import sys
from dataclasses import dataclass
from typing import BinaryIO

from sync.core.errors import BadResponseError
from sync.pipeline.batches import Staged, StagedPage
from sync.pipeline.seen import Seen, Sent
from sync.pipeline.staging import stage_listing


@dataclass(frozen=True)
class Refused:
    """A page `stage_listing` refused, carried back from a worker as a value."""

    message: str
    hint: str | None


#: What a worker is asked: (type, body, page number, HTTP status, mall id, included types to skip).
Request = tuple[str, bytes, int, int, int | None, tuple[str, ...]]


def stage_request(request: Request, written: Seen | None = None) -> StagedPage | Refused:
    """Stage one request (see `Request`; `written`: see `stage_resources`); never raises for a
    bad page.

    The URL is left out of the message (the pool adds it back where the request was made).
    """
    type_name, body, number, status, mall_id, skip = request
    try:
        return stage_listing(
            type_name,
            body,
            number=number,
            url="",
            status=status,
            mall_id=mall_id,
            skip=skip,
            written=written,
        )
    except BadResponseError as exc:
        return Refused(exc.message, exc.hint)


def bulk_gc() -> None:
    """Tune the cycle collector for bulk parsing.

    Parsing a page allocates tens of thousands of dicts and lists that reference counting
    frees (JSON has no cycles), yet every 700 allocations trigger a collection that walks
    the young objects, and the oldest generation is walked again and again as it grows. Fewer
    collections cut ~20 % of a backfill's CPU; what exists at start-up is frozen out of them.
    """
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


#: The version of the pipe's framing and of what crosses it; change it with either.
PROTOCOL = 7
#: A request: (length of the pickled (type, page number, status, mall id, skip, ticket, tickets
#: written since the last request), length of the body), then those two; an answer: its
#: length, then the `StagedPage` or `Refused` (`to_wire`).
REQUEST = struct.Struct("!II")
ANSWER = struct.Struct("!I")


def to_wire(result: StagedPage | Refused) -> bytes:
    """An answer as it crosses the pipe: `marshal` of plain tuples, lists and dicts.

    Not pickle: a pickled dataclass is rebuilt attribute by attribute, and the main process
    reads an answer per page. marshal of the same values is ~40 % cheaper to load and ~60 %
    cheaper to dump. Its format is the interpreter's own, which a worker shares: it runs the
    main process's `sys.executable` and refuses another `PROTOCOL` (`worker_main`).
    """
    if isinstance(result, Refused):
        return marshal.dumps((0, result.message, result.hint))
    batches = [
        (
            b.type,
            b.ids,
            b.columns,
            b.rows,
            b.samples,
            b.links,
            b.versions,
            b.dropped,
            b.refused,
            b.coerced,
        )
        for b in result.batches
    ]
    page = (batches, result.resources, result.number, result.last, result.scripts, result.ticket)
    return marshal.dumps((1, *page))


def from_wire(data: bytes) -> StagedPage | Refused:
    """The answer `to_wire` sent."""
    kind, *rest = marshal.loads(data)
    if kind == 0:
        return Refused(*rest)
    batches, resources, number, last, scripts, ticket = rest
    return StagedPage(
        batches=[
            Staged(
                type=t,
                ids=ids,
                columns=columns,
                rows=rows,
                samples=samples,
                links=links,
                versions=versions,
                dropped=dropped,
                refused=refused,
                coerced=coerced,
            )
            for t, ids, columns, rows, samples, links, versions, dropped, refused, coerced in batches
        ],
        resources=resources,
        number=number,
        last=last,
        scripts=scripts,
        ticket=ticket,
    )


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Answer the requests on `inp` (see `REQUEST`) in order, until end of input."""
    sent = Sent()
    while True:
        head = inp.read(REQUEST.size)
        if len(head) < REQUEST.size:
            return  # end of input: the main process closed the pool, or died
        meta_size, body_size = REQUEST.unpack(head)
        meta, body = inp.read(meta_size), inp.read(body_size)
        if len(meta) < meta_size or len(body) < body_size:
            return
        type_name, number, status, mall_id, skip, ticket, written = pickle.loads(meta)
        sent.confirm(written)
        result = stage_request((type_name, body, number, status, mall_id, skip), sent.written)
        if isinstance(result, StagedPage):
            sent.filter(result, ticket)
        answer = to_wire(result)
        out.write(ANSWER.pack(len(answer)) + answer)
        out.flush()


def worker_main(protocol: int) -> None:
    """Entry point of a page worker: `python -c "from sync.pipeline.pageworker import worker_main; ..."`.

    Not `python -m sync.pipeline.pageworker`: that would define these classes in `__main__` beside
    the ones the main process imports from `sync.pipeline.pageworker`. `protocol` is the main process's
    `PROTOCOL`: a worker started from a newer install (sync upgraded during a run) exits at
    once instead of misreading the pipe, and the main process stages the pages itself.
    """
    if protocol != PROTOCOL:
        os._exit(3)
    # Ctrl-C and `systemctl stop` signal the whole process group: the main process decides
    # when to stop, and closing our stdin is how it says so.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    bulk_gc()
    with contextlib.suppress(BrokenPipeError):  # the main process is gone: nobody to answer
        serve(sys.stdin.buffer, sys.stdout.buffer)
    os._exit(0)  # skip interpreter teardown; stdout may be a closed pipe
