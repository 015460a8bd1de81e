"""Staging: a page's resources turned into the rows the mirror's page write binds, with no database.

Each resource becomes one tuple of column values (id first; booleans 0/1, objects and arrays as
JSON text), plus its to-many links; the included resources are grouped by type and staged the
same way, each with its version. Staging needs no connection and returns plain picklable values,
which is what lets a backfill stage pages in a worker process on another core (`sync.pipeline.pagepool`)
while the main process only binds the rows (see `Mirror.write_staged`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import math
import os
import pickle
import re
import signal
import struct
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson
from xxhash import xxh3_128_digest

from sync.channel.pages import decode_listing, to_page
from sync.core.errors import BadResponseError
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.columns import VALUE_KINDS, ValueKind
from sync.model.stamps import ABSOLUTE, CANONICAL, StampError
from sync.model.stamps import normalize as normalize_stamp
from sync.pipeline.seen import Seen, SeenTable

_MISSING = object()
ABSOLUTE_STAMPS = tuple(sorted(ABSOLUTE))
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
#: The Python types (as parsed from JSON) each kind of declared attribute takes as it is.
_FITS: dict[ValueKind, frozenset[type]] = {
    "boolean": frozenset({bool, type(None)}),
    "integer": frozenset({int, type(None)}),
    "number": frozenset({int, float, type(None)}),
}
_SPEC_NAME = {"boolean": "a boolean", "integer": "an integer", "number": "a number"}
_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
#: Characters of a refused value kept for the log line and `_sync_refusals`.
VALUE_CHARS = 80


def encode(value: Any) -> Any:
    """A JSON value as the mirror stores it: booleans 0/1, objects and arrays as JSON text."""
    kind = type(value)  # exact types: this runs once per attribute on the hot path
    if kind is str or value is None:
        return value
    if kind is bool:
        return int(value)
    if kind is dict or kind is list:
        return dumps(value).decode()
    if kind is int and not _INT64_MIN <= value <= _INT64_MAX:
        return float(value)  # beyond SQLite's integers (a JSON parser reads them as int)
    return value


def dumps(value: Any) -> bytes:
    """`orjson.dumps`, or the standard library's for a value holding an integer beyond 64 bits
    (`decode_listing` keeps every integer exact; orjson cannot write those)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def version(res: dict[str, Any]) -> object:
    """What identifies one copy of a resource: its `updated_at`, else a digest of all of it.

    The digest (128-bit XXH3) is of the resource serialised as it came, so it is the same in
    every process; keys are not sorted (a fifth of the cost): a copy whose keys come in
    another order only looks like a new version, and is written once more.
    """
    attrs = res.get("attributes")
    stamp = attrs.get("updated_at") if isinstance(attrs, dict) else None
    if isinstance(stamp, str):
        return stamp
    return xxh3_128_digest(dumps(res))


def to_int(raw: Any) -> int | None:
    """An upstream id as the integer key of the mirror, or None when it is not one."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def safe_name(name: str) -> bool:
    """Attribute names usable as a column and a JSON path (no double quotes, brackets or NUL)."""
    return bool(name) and not any(c in name for c in '"[]\x00')


@dataclass
class Staged:
    """One type's part of a page, ready for the set-based upsert.

    `rows[i]` is `(ids[i], *values)` in the order of `columns`; a resource without one of the
    batch's attributes has NULL there. `samples` holds the first non-null value of every
    column (a new column takes its SQLite type from it); `versions` is filled for included
    resources, so the writer can skip a copy identical to the one it last committed.
    """

    type: str
    ids: list[int] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    samples: dict[str, Any] = field(default_factory=dict)
    links: dict[str, list[tuple[int, list[int]]]] = field(default_factory=dict)
    versions: list[object] | None = None
    dropped: int = 0
    #: Resources left out because a value does not fit its declared type or a stamp cannot be
    #: read (the mirror keeps its last good copy): (id, attribute, value clipped, problem).
    refused: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: Values converted losslessly to their declared type (`"7"` for an integer): (id,
    #: attribute, value as sent, clipped).
    coerced: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def rtype(self) -> ResourceType:
        return catalogue.TYPES[self.type]

    def keep(self, wanted: Sequence[bool]) -> None:
        """Keep only the rows whose flag is true (ids, rows, versions and links alike)."""
        gone = {i for i, w in zip(self.ids, wanted, strict=True) if not w}
        if not gone:
            return
        self.rows = [r for r, w in zip(self.rows, wanted, strict=True) if w]
        if self.versions is not None:
            self.versions = [v for v, w in zip(self.versions, wanted, strict=True) if w]
        self.ids = [i for i, w in zip(self.ids, wanted, strict=True) if w]
        self.links = {
            n: [(o, r) for o, r in pairs if o not in gone] for n, pairs in self.links.items()
        }


@dataclass
class StagedPage:
    """A listing page, staged: the listed type's batch first, then one per included type."""

    batches: list[Staged]
    resources: int  # resources in `data`, before any was skipped
    number: int
    last: int
    #: `meta.scripts` as served (None: no such key); the mirror checks it (`sync.store.scripts`).
    scripts: Any = None
    ticket: int = 0  # the worker's number for this page (`Sent`); 0 when staged in-process


def _fits(folded: set[str], key: str) -> bool:
    """Whether `key` can be a column beside those whose lower-case names are `folded`: SQLite names are case-insensitive, so
    `Title` cannot sit beside `title` (the first spelling seen is stored, the other is not)."""
    low = key.lower()
    return low != "id" and low not in folded and safe_name(key)


def stage(
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    mall_id: int | None,
    *,
    with_versions: bool = False,
) -> Staged:
    """Stage resources of one type (`mall_id` is stored on each row of a mall-scoped type)."""
    b = Staged(rtype.name, versions=[] if with_versions else None)
    keys: dict[str, None] = {}  # columns in the order first seen
    folded: set[str] = set()
    docs: list[dict[str, Any]] = []
    for res in resources:
        rid = to_int(res.get("id"))
        if rid is None:
            continue  # not an id the mirror can key: skip rather than poison the page
        doc: dict[str, Any] = res.get("attributes") or {}
        extra: dict[str, Any] = {}
        bad = None
        for k in ABSOLUTE_STAMPS:
            v = doc.get(k)
            if v is None or (type(v) is str and CANONICAL.fullmatch(v)):
                continue
            try:
                if not isinstance(v, str):
                    raise StampError(f"{str(v)[:60]!r} is not a timestamp string")
                extra[k] = normalize_stamp(v)
            except StampError as exc:
                bad = (rid, k, clip(v), str(exc))
                break
        if bad is not None:
            b.refused.append(bad)  # logged by the writer; the mirror keeps its copy
            continue
        meta = res.get("meta")
        if meta:
            extra.update((f"meta_{k}", v) for k, v in meta.items())
        if mall_id is not None:
            extra["mall_id"] = mall_id
        rels = res.get("relationships")
        if rels:
            for rel in rtype.relationships:
                data = (rels.get(rel.name) or {}).get("data", _MISSING)
                if data is _MISSING:
                    continue
                if rel.to_one:
                    extra[rel.column] = to_int(data.get("id")) if isinstance(data, dict) else None
                elif isinstance(data, list):
                    related = [
                        i
                        for d in data
                        if isinstance(d, dict) and (i := to_int(d.get("id"))) is not None
                    ]
                    b.links.setdefault(rel.name, []).append((rid, related))
        if extra:
            doc = {**doc, **extra}
        if not doc.keys() <= keys.keys():
            for k in doc:
                if k not in keys and _fits(folded, k):
                    keys[k] = None
                    folded.add(k.lower())
        b.ids.append(rid)
        docs.append(doc)
        if b.versions is not None:
            stamp = doc.get("updated_at")
            b.versions.append(stamp if isinstance(stamp, str) else version(res))
    b.columns = cols = tuple(sorted(keys))
    rows = b.rows
    for rid, doc in zip(b.ids, docs, strict=True):
        rows.append((rid, *[encode(doc.get(c)) for c in cols]))
    kinds = VALUE_KINDS.get(rtype.name)
    if kinds and docs:
        docs = _check_values(b, docs, kinds, keys)
    samples = b.samples
    for k in keys:  # first non-null value of each column, in document order
        for doc in docs:
            value = doc.get(k)
            if value is not None:
                samples[k] = encode(value)
                break
        else:
            samples[k] = None
    return b


def _check_values(
    b: Staged, docs: list[dict[str, Any]], kinds: dict[str, ValueKind], keys: dict[str, None]
) -> list[dict[str, Any]]:
    """Hold each declared number and boolean attribute of the batch to its kind: a value
    converted losslessly (`coerce`) is written converted and noted in `b.coerced`; a resource
    with a value that does not fit is left out (`b.refused`; the mirror keeps its last good
    copy), and the documents of those kept are returned.

    The hot path: one set of the value types per declared column and page (~3 us), so a
    well-typed page costs next to nothing; only a column holding a misfit is looked at value
    by value."""
    wanted: list[bool] | None = None
    for column, kind in kinds.items():
        if column not in keys:
            continue
        fits = _FITS[kind]
        pos = b.columns.index(column) + 1
        if {type(d.get(column)) for d in docs} <= fits and (
            kind != "integer" or float not in {type(r[pos]) for r in b.rows}  # beyond 64 bits
        ):
            continue
        for j, doc in enumerate(docs):
            raw = doc.get(column)
            if type(raw) in fits and (type(raw) is not int or _INT64_MIN <= raw <= _INT64_MAX):
                continue
            rid = b.ids[j]
            value = coerce(kind, raw)
            if value is None:
                if wanted is None:
                    wanted = [True] * len(docs)
                wanted[j] = False
                problem = f"{_what(raw)} where the spec declares {_SPEC_NAME[kind]}"
                b.refused.append((rid, column, clip(raw), problem))
            else:
                row = b.rows[j]
                b.rows[j] = (*row[:pos], value, *row[pos + 1 :])
                b.coerced.append((rid, column, clip(raw)))
    if wanted is None:
        return docs
    b.keep(wanted)
    return [d for d, w in zip(docs, wanted, strict=True) if w]


def coerce(kind: ValueKind, raw: Any) -> int | float | None:
    """`raw` as the `kind` it was declared, when that is lossless and unambiguous (the value
    reads back as sent), else None: `"7"` and `7.0` for an integer; `"true"`, `"false"`, 0 and
    1 for a boolean; `"10.5"` for a number. Not `"07"`, `"7.50"`, `"yes"`, `true` for a number,
    an integer beyond SQLite's 64 bits, nor any object or array."""
    t = type(raw)
    if kind == "boolean":
        if t is str and raw in ("true", "false"):
            return int(raw == "true")
        if t is int and raw in (0, 1):
            return int(raw)
        return None
    if t is str and _INTEGER_TEXT.fullmatch(raw):
        number = int(raw)
        return number if _INT64_MIN <= number <= _INT64_MAX else None
    if kind == "integer":
        if t is float and raw.is_integer() and _INT64_MIN <= raw <= _INT64_MAX:
            return int(raw)
        return None
    if t is str:
        try:
            number_f = float(raw)
        except ValueError:
            return None
        return number_f if math.isfinite(number_f) and repr(number_f) == raw else None
    return None


def _what(raw: Any) -> str:
    """How a refused value is described: its JSON kind."""
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, int):
        return "an integer beyond 64 bits" if not _INT64_MIN <= raw <= _INT64_MAX else "an integer"
    if isinstance(raw, float):
        return "a number with a fraction" if math.isfinite(raw) else "a non-finite number"
    if isinstance(raw, str):
        return "text"
    if isinstance(raw, dict):
        return "an object"
    if isinstance(raw, list):
        return "an array"
    return type(raw).__name__


def clip(raw: Any) -> str:
    """A value as a log line and `_sync_refusals` show it: its JSON, at most `VALUE_CHARS`."""
    text = dumps(raw).decode("utf-8", "replace")
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def written_already(res: dict[str, Any], have: object | None, written: Seen) -> bool:
    """Whether an included resource is the very copy `written` holds for its (type, id)
    (`have`, its version there, looked up a page at a time), by the version `stage` would
    give it: staging it would only make a row that `Sent.filter` then leaves out. A resource
    `stage` would refuse or re-stamp is not decided here (it is staged and filtered as
    before), so the rows sent, and the refusals logged, are the same."""
    if have is None:
        return False
    attrs = res.get("attributes") or {}
    for k in ABSOLUTE_STAMPS:
        v = attrs.get(k)
        if v is not None and not (type(v) is str and CANONICAL.fullmatch(v)):
            return False
    stamp = attrs.get("updated_at")
    return bool(have == written.form(stamp if isinstance(stamp, str) else version(res)))


def stage_resources(
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    included: Sequence[dict[str, Any]] = (),
    mall_id: int | None = None,
    *,
    skip: Collection[str] = (),
    written: Seen | None = None,
) -> list[Staged]:
    """The batches of one page: the listed type's, then one per known included type.

    Included resources of the types in `skip` are left out (a backfill's trimmed sideloads,
    `catalogue.sideload_trim`: partial copies of rows their own listing brings whole), and so
    are those `written` already holds at the same version (a worker's `Sent.written`): images
    and tags repeat on page after page, and most copies were staged only to be dropped by
    `Sent.filter` (at 200k, 378k included copies staged for 143k sent; now 144k staged).
    """
    batches = [stage(rtype, resources, mall_id if rtype.level == "mall" else None)]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for res in included:
        name = res.get("type")
        if isinstance(name, str) and name in catalogue.TYPES and name not in skip:
            by_type.setdefault(name, []).append(res)
    if written is not None and len(written):
        for name, items in by_type.items():
            ids = [to_int(res.get("id")) for res in items]
            held = written.versions_of(name, ids)
            if held:
                by_type[name] = [
                    res
                    for res, rid in zip(items, ids, strict=True)
                    if rid is None or not written_already(res, held.get(rid), written)
                ]
        by_type = {name: items for name, items in by_type.items() if items}
    for name, items in by_type.items():
        batches.append(stage(catalogue.TYPES[name], items, None, with_versions=True))
    return batches


def stage_listing(
    type_name: str,
    body: bytes,
    *,
    number: int,
    url: str,
    status: int,
    mall_id: int | None,
    skip: Collection[str] = (),
    written: Seen | None = None,
) -> StagedPage:
    """Parse, validate and stage one listing page from its raw body (`skip`, `written`: see
    `stage_resources`).

    Raises `BadResponseError` for a body that is not a JSON:API collection, exactly as the
    client's `list_page` does.
    """
    page = to_page(decode_listing(body, url, status), number, url, status, None)
    rtype = catalogue.TYPES[type_name]
    return StagedPage(
        batches=stage_resources(
            rtype, page.resources, page.included, mall_id, skip=skip, written=written
        ),
        resources=len(page.resources),
        number=number,
        last=page.last,
        scripts=page.meta.get("scripts"),
    )


# -- the worker process (started by `sync.pipeline.pagepool`) ------------------------------------------


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


class Sent:
    """A worker's memory of the included rows the main process has written, to send them once.

    Images and tags repeat on page after page (at 200k resources, 146k included copies of 33k
    distinct rows): staging and pickling the copies here, and unpickling and comparing them in
    the main process, cost both processes CPU for rows the writer then skips. A worker leaves
    out an included row whose (type, id) and version are in `written` (a `sync.pipeline.seen.Seen`):
    before staging it (`stage_resources`), and, for a copy only staging can version, after
    (`filter`). A row enters `written` only when the main process reports that the page which
    carried it was written (`confirm`, with the next request): a page staged here but dropped
    there (its task cancelled: a type refused with 403 stops its other pages while the rest
    run on) must not make a later page leave out a row that never reached the mirror. Bounded:
    `written` forgets its oldest half when full (those rows are then sent again), and
    unconfirmed pages are forgotten.
    """

    #: Rows remembered: every distinct included row up to ~1.8M resources (33k of them at
    #: 200k, ~165k at 1M). Up to `DICT_ROWS` in a dict (`Seen`, ~115 bytes a row, ~4.6 MB),
    #: the fastest to look up; past it in SQLite (`SeenTable`, ~40 bytes a row, ~12 MB full),
    #: which costs ~0.1 ms a page more. A dict held to 80,000 caught only about a third of
    #: the copies at 1M.
    LIMIT = 300_000
    DICT_ROWS = 40_000
    PENDING = 512

    def __init__(self) -> None:
        self.written: Seen = Seen(2 * self.DICT_ROWS)  # moved to SQLite before it is full
        self.pending: dict[int, list[tuple[str, list[int], list[object]]]] = {}

    def confirm(self, tickets: Sequence[int]) -> None:
        """The main process wrote the pages with these tickets."""
        for ticket in tickets:
            for name, ids, versions in self.pending.pop(ticket, ()):
                self.written.add(name, ids, versions)
        if type(self.written) is Seen and len(self.written) > self.DICT_ROWS:
            self.written = SeenTable.holding(self.written, self.LIMIT)

    def filter(self, page: StagedPage, ticket: int) -> None:
        """Leave out the included rows already written; remember the rest under `ticket`."""
        written = self.written
        rows: list[tuple[str, list[int], list[object]]] = []
        for b in page.batches[1:]:
            if b.versions is None:
                continue
            if len(written):
                b.keep(written.unwritten(b.type, b.ids, b.versions))
            if b.ids:
                rows.append((b.type, b.ids, b.versions))
        page.ticket = ticket
        self.pending[ticket] = rows
        if len(self.pending) > self.PENDING:  # pages the main process dropped: never written
            del self.pending[next(iter(self.pending))]


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
    """Entry point of a page worker: `python -c "from sync.pipeline.staging import worker_main; ..."`.

    Not `python -m sync.pipeline.staging`: that would define these classes in `__main__`, and the
    pickles the main process reads must name `sync.pipeline.staging`. `protocol` is the main process's
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
