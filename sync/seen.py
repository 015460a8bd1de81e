"""Which copy of an included row was last written: a compact, bounded memo of (type, id) -> version.

Images, tags and groups come included with page after page (at 200k resources, 146k included
copies of 33k distinct rows). Writing a copy identical to the one already written is wasted
work twice over: in the page worker, which parses, stages and encodes it, and in the main
process, which decodes it and binds it to SQLite. Both keep a `Seen` of what was written and
leave such copies out (`sync.staging.Sent`, `Mirror.write_staged`).

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
`sync.staging.version` gives it, as before).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from sync import catalogue

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
        """The remembered version of the row (as `compact` gives it), None when unknown."""
        key = self.key(type_name, rid)
        return None if key is None else self._versions.get(key)

    def holds(self, type_name: str, rid: int, version: object) -> bool:
        """Whether this very copy (same version) of the row is the one last written."""
        have = self.version_of(type_name, rid)
        return have is not None and have == compact(version)

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
