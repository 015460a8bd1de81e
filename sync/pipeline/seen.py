"""Which copy of an included row was last written: a compact, bounded memo of (type, id) -> version.

Images, tags and groups come included with page after page (at 200k resources, 146k included
copies of 33k distinct rows). Writing a copy identical to the one already written is wasted
work twice over: in the page worker, which parses, stages and encodes it, and in the main
process, which decodes it and binds it to SQLite. Both keep a `Seen` of what was written and
leave such copies out: the worker's is `Sent` (it learns what was written from the main
process, page by page), the writer's the store's (`Mirror.write_staged`, `Seen.leave_out` and
`Seen.remember`); a page staged in the main process asks the writer's before staging an
included copy at all (`written_already`, `PagePool.memo`).

This module is the one home of that memo: which rows, how they are keyed and versioned, when
they are forgotten, and how a batch is trimmed by it.

The memo must hold every distinct included row of a backfill to be of use: includes are spread
uniformly over the rows, so a memo of half of them catches about half of the copies (the one
it replaced held 20,000 rows and was emptied when full: 107k of the 146k copies still crossed to
the main process at 200k resources). It is therefore compact, ~110 bytes a row against ~185 for
a dict keyed by (type, id) tuples: one int key per row (id and type packed) and the version as
an int when it is a stamp of the canonical width (`YYYY-MM-DDTHH:MM:SS.sssZ`, the form
staging writes). When full it forgets its oldest half rather than everything.

Only an optimisation: a row it does not know is simply written again. Forgetting is always
safe; remembering must be exact, which it is: keys and versions are compared whole, with no
hashing of its own (a row without `updated_at` is versioned by the 128-bit digest that
`sync.pipeline.encoding.version` gives it, as before).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from sync.model import catalogue
from sync.pipeline.batches import Staged, StagedPage
from sync.pipeline.checks import check_stamps
from sync.pipeline.encoding import version

#: A small number per type, packed into the key beside the id (`Seen.key`).
_CODES = {name: i for i, name in enumerate(catalogue.TYPES)}
_SHIFT = 5
assert len(_CODES) < 1 << _SHIFT
_MAX_ID = 1 << 57  # packed keys stay below 2**62: small int objects (32 bytes)


def compact(version: object) -> object:
    """`version` as the memo stores it: a stamp of the canonical width (24 ASCII characters) as
    the int of its bytes (52 bytes instead of 73, and ~0.15 us against ~1 us for parsing its
    digits), anything else (a digest, another stamp form) as it is. Exact both ways: two
    strings of 24 ASCII characters give the same int only when equal, and an int never equals
    a str or bytes."""
    if type(version) is str and len(version) == 24 and version.isascii():
        return int.from_bytes(version.encode())
    return version


class Seen:
    """(type, id) -> version of the included rows written, at most `limit` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._versions: dict[int, object] = {}

    @staticmethod
    def key(type_name: str, rid: int) -> int | None:
        """The packed key of a row; None for a row the memo cannot hold (an id out of range,
        a type outside the catalogue): such a row is never taken for written."""
        code = _CODES.get(type_name)
        if code is None or not 0 <= rid < _MAX_ID:
            return None
        return (rid << _SHIFT) | code

    def __len__(self) -> int:
        return len(self._versions)

    def clear(self) -> None:
        self._versions.clear()

    def forget(self, type_name: str, ids: Iterable[int]) -> None:
        """Forget these rows: their next copy is written whatever its version."""
        for rid in ids:
            key = self.key(type_name, rid)
            if key is not None:
                self._versions.pop(key, None)

    def version_of(self, type_name: str, rid: int) -> object | None:
        """The remembered version of the row (as `form` gives it), None when unknown."""
        key = self.key(type_name, rid)
        return None if key is None else self._versions.get(key)

    def versions_of(self, type_name: str, ids: Iterable[int | None]) -> dict[int, object]:
        """The remembered versions (as `form` gives them) of those of `ids` it holds."""
        found: dict[int, object] = {}
        for rid in ids:
            if rid is not None and (have := self.version_of(type_name, rid)) is not None:
                found[rid] = have
        return found

    def form(self, version: object) -> object:
        """`version` as this memo stores and returns it (`compact`)."""
        return compact(version)

    def holds(self, type_name: str, rid: int, version: object) -> bool:
        """Whether this very copy (same version) of the row is the one last written."""
        have = self.version_of(type_name, rid)
        return have is not None and have == self.form(version)

    def unwritten(
        self, type_name: str, ids: Iterable[int], versions: Iterable[object]
    ) -> list[bool]:
        """Per row, whether it is *not* the copy last written (the rows to keep). Packs the keys
        as `key` does, inline: it runs on every included row of every page."""
        code = _CODES.get(type_name)
        if code is None or not self._versions:
            return [True for _ in ids]
        get = self._versions.get
        return [
            not (0 <= i < _MAX_ID and get((i << _SHIFT) | code) == compact(v))
            for i, v in zip(ids, versions, strict=True)
        ]

    def leave_out(self, batches: Iterable[Staged]) -> None:
        """Drop from each batch of included rows (one with `versions`) the copies this memo
        holds at the same version: written already, they would be written again for nothing."""
        if not len(self):
            return
        for b in batches:
            if b.versions is not None:
                b.keep(self.unwritten(b.type, b.ids, b.versions))

    def remember(self, batches: Iterable[Staged]) -> None:
        """Remember the included rows of `batches` (those with `versions`) as written."""
        for b in batches:
            if b.versions is not None:
                self.add(b.type, b.ids, b.versions)

    def add(self, type_name: str, ids: Iterable[int], versions: Iterable[object]) -> None:
        """Remember these copies as the ones written (forgetting the oldest half when full:
        oldest by first insertion, which for rows included uniformly is as good as any)."""
        code = _CODES.get(type_name)
        if code is None:
            return
        store = self._versions
        for i, v in zip(ids, versions, strict=True):
            if 0 <= i < _MAX_ID:
                store[(i << _SHIFT) | code] = compact(v)  # in place: no deleted slot left
        if len(store) > self.limit:
            # Into a new dict: deleting from this one would leave its table sized for the
            # rows it held, and the next insertions would double it.
            keep = self.limit // 2
            self._versions = dict(itertools.islice(store.items(), len(store) - keep, None))


class SeenTable(Seen):
    """The same memo in an in-memory SQLite table: ~40 bytes a row against `Seen`'s ~115.

    A page worker's memo (`Sent`) must hold every distinct included row to catch
    their copies, and at 1M resources there are ~165k of them: ~19 MB as a dict, which put
    sync's peak RSS near its 150 MB limit, so the dict was held to 80,000 rows and ~650k
    copies still reached the mirror (images 3.4 times each, tags 10.6 times). Here the rows
    are SQLite records (the key an INTEGER PRIMARY KEY, the version as it came: a stamp's
    text or a digest's bytes, compared whole), looked up a batch at a time. A worker pays
    ~0.1 ms a page for the queries; the main process, which writes every page, keeps the
    dict. When full it forgets half (the lowest keys: for rows included uniformly, as good
    as any).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.execute("CREATE TABLE seen (k INTEGER PRIMARY KEY, v NOT NULL)")
        self._bound = 0  # an upper bound of the rows held (exact after `_shrink`)

    @classmethod
    def holding(cls, seen: Seen, limit: int) -> SeenTable:
        """A `SeenTable` of `limit` rows that holds what the dict `seen` holds (its stamps
        turned back from `compact`'s ints into their text)."""
        table = cls(limit)
        rows = [
            (k, v.to_bytes(24, "big").decode("ascii") if type(v) is int else v)
            for k, v in seen._versions.items()
        ]
        table._db.executemany("INSERT OR REPLACE INTO seen (k, v) VALUES (?, ?)", rows)
        table._bound = len(rows)
        if table._bound > limit:
            table._shrink()
        return table

    def __len__(self) -> int:
        return self._bound

    def clear(self) -> None:
        self._db.execute("DELETE FROM seen")
        self._bound = 0

    def form(self, version: object) -> object:
        return version

    def _keys(self, type_name: str, ids: Iterable[int | None]) -> list[int]:
        code = _CODES.get(type_name)
        if code is None:
            return []
        return [(i << _SHIFT) | code for i in ids if i is not None and 0 <= i < _MAX_ID]

    def _held(self, keys: list[int]) -> dict[int, object]:
        if not keys or not self._bound:
            return {}
        return dict(
            self._db.execute(
                "SELECT k, v FROM seen WHERE k IN (SELECT value FROM json_each(?))",
                (orjson.dumps(keys),),
            )
        )

    def forget(self, type_name: str, ids: Iterable[int]) -> None:
        keys = self._keys(type_name, ids)
        if keys and self._bound:
            self._db.execute(
                "DELETE FROM seen WHERE k IN (SELECT value FROM json_each(?))",
                (orjson.dumps(keys),),
            )

    def version_of(self, type_name: str, rid: int) -> object | None:
        return self.versions_of(type_name, [rid]).get(rid)

    def versions_of(self, type_name: str, ids: Iterable[int | None]) -> dict[int, object]:
        held = self._held(self._keys(type_name, ids))
        return {k >> _SHIFT: v for k, v in held.items()}

    def unwritten(
        self, type_name: str, ids: Iterable[int], versions: Iterable[object]
    ) -> list[bool]:
        code = _CODES.get(type_name)
        ids = list(ids)
        if code is None or not self._bound:
            return [True for _ in ids]
        keys = [(i << _SHIFT) | code if 0 <= i < _MAX_ID else -1 for i in ids]
        held = self._held([k for k in keys if k >= 0])
        return [k < 0 or held.get(k) != v for k, v in zip(keys, versions, strict=True)]

    def add(self, type_name: str, ids: Iterable[int], versions: Iterable[object]) -> None:
        code = _CODES.get(type_name)
        if code is None:
            return
        rows = [
            ((i << _SHIFT) | code, v)
            for i, v in zip(ids, versions, strict=True)
            if 0 <= i < _MAX_ID
        ]
        if not rows:
            return
        self._db.executemany("INSERT OR REPLACE INTO seen (k, v) VALUES (?, ?)", rows)
        self._bound += len(rows)
        if self._bound > self.limit:
            self._shrink()

    def _shrink(self) -> None:
        self._bound = self._db.execute("SELECT count(*) FROM seen").fetchone()[0]
        if self._bound > self.limit:
            drop = self._bound - self.limit // 2
            self._db.execute(
                "DELETE FROM seen WHERE k IN (SELECT k FROM seen ORDER BY k LIMIT ?)", (drop,)
            )
            self._bound -= drop


def written_already(res: dict[str, Any], have: object | None, written: Seen) -> bool:
    """Whether an included resource is the very copy `written` holds for its (type, id)
    (`have`, its version there, looked up a page at a time), by the version staging would
    give it: staging it would only make a row that `Seen.leave_out` then drops. A resource
    staging would refuse or re-stamp (`check_stamps`) is not decided here (it is staged and
    left out as before), so the rows sent, and the refusals logged, are the same."""
    if have is None:
        return False
    attrs = res.get("attributes") or {}
    restamped: dict[str, Any] = {}
    if check_stamps(0, attrs, restamped) is not None or restamped:
        return False
    stamp = attrs.get("updated_at")
    return bool(have == written.form(stamp if isinstance(stamp, str) else version(res)))


class Sent:
    """A worker's memory of the included rows the main process has written, to send them once.

    Images and tags repeat on page after page (at 200k resources, 146k included copies of 33k
    distinct rows): staging and pickling the copies here, and unpickling and comparing them in
    the main process, cost both processes CPU for rows the writer then skips. A worker leaves
    out an included row whose (type, id) and version are in `written` (a `Seen`):
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
        self.written.leave_out(page.batches[1:])
        rows = [
            (b.type, b.ids, b.versions)
            for b in page.batches[1:]
            if b.versions is not None and b.ids
        ]
        page.ticket = ticket
        self.pending[ticket] = rows
        if len(self.pending) > self.PENDING:  # pages the main process dropped: never written
            del self.pending[next(iter(self.pending))]
