"""How the emulator holds one resource, compactly: `Rec` and the inverse-linkage index `Owners`.

A million resources held as Python dicts took ~2.8 KB each (issue #21: 12.3 GB at 1M while
serving). A `Rec` keeps its attributes as the JSON bytes it is served with (`blob`, decoded only
when a filter, a sparse fieldset or a mutation needs a value), the few values that queries read
on every row (`hot`: `updated_at`, a deal's visibility, ...) beside it, and its linkage as a
tuple in the order of its type's `LINK_NAMES`. `Owners` maps a resource to the resources whose
links name it, with both packed into one integer and the owners of one target in an `array`.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterator
from typing import Any

import orjson

#: The relationships whose linkage a record holds itself, per type, in storage order.
LINK_NAMES: dict[str, tuple[str, ...]] = {
    "malls": ("images",),
    "articles": ("images", "tags", "malls", "products"),
    "images": ("tags",),
    "tags": ("tags",),
    "products": ("images", "tags", "stores"),
    "deals": ("images", "tags", "stores"),
    "stores": ("images", "tags", "groups", "mall", "contacts", "social_feeds"),
    "events": ("images", "groups", "tags", "mall"),
    "ifeatures": ("mall",),
    "job_listings": ("images", "store"),
    "mall_messages": ("mall",),
    "press_releases": ("mall",),
}
#: Attributes read on (nearly) every row by queries, kept decoded beside the blob: polls filter
#: and sort on `updated_at`, every `/deals` listing filters on `visibility`, `mall_deals` reads
#: `is_local` and `exclude_national_deals`, the deletions feed sorts on `created_at`.
HOT: dict[str, tuple[str, ...]] = {
    "deals": ("updated_at", "visibility", "is_local"),
    "malls": ("updated_at", "exclude_national_deals"),
    "deletions": ("updated_at", "created_at", "resource_type"),
}
DEFAULT_HOT = ("updated_at",)
_HOT_INDEX = {t: {n: i for i, n in enumerate(h)} for t, h in [*HOT.items(), ("", DEFAULT_HOT)]}
_EMPTY: tuple[int, ...] = ()
_TO_ONE = frozenset({"mall", "store"})


def exact(blob: bytes) -> bytes:
    """A copy of `blob` holding only its length: `orjson.dumps` returns its bytes in a buffer of
    ~8 KB whatever their length (measured with orjson 3.13: 8,154 bytes held for a 620-byte
    document), which a cache of many small documents multiplies."""
    return bytes(memoryview(blob))


_revisions = itertools.count(1)


def next_revision() -> int:
    """A revision no record has had (revisions are unique across data sets)."""
    return next(_revisions)


class Attrs(dict[str, Any]):
    """A record's attributes, decoded; a change made through it is written back to the record
    (so `rec.attrs.update(...)` keeps working as it did when attributes were a plain dict)."""

    __slots__ = ("_rec",)

    def __init__(self, rec: Rec, values: dict[str, Any]) -> None:
        super().__init__(values)
        self._rec = rec

    def _store(self) -> None:
        self._rec.set_attrs(dict(self))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._store()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._store()

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._store()

    def pop(self, key: str, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._store()
        return value

    def setdefault(self, key: str, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        self._store()
        return value

    def clear(self) -> None:
        super().clear()
        self._store()


class _NoEncodings:
    """`Rec.enc` of old: encodings now live in `Dataset.encodings`, keyed by revision, so
    clearing a record's is nothing to do."""

    def clear(self) -> None:
        return None


_NO_ENCODINGS = _NoEncodings()


class Rec:
    """One resource: attributes as served JSON, hot values, owned linkage, revision.

    `attrs` is decoded on each access (changes through it are written back); `links` is a copy:
    change linkage through `Dataset.set_links`, which keeps the inverse index in step. `rev`
    changes with every change of attributes or linkage, so cached encodings of an older
    revision are never served.
    """

    __slots__ = ("blob", "hot", "id", "mall", "meta", "packed", "rev", "type")

    def __init__(
        self,
        type: str,
        id: int,
        attrs: dict[str, Any],
        mall: int | None = None,
        links: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.type, self.id, self.mall, self.meta, self.rev = type, id, mall, meta, 0
        self.blob = b""
        self.hot: tuple[Any, ...] = ()
        self.packed: tuple[Any, ...] = ()
        self.set_attrs(attrs)
        self.set_links(links or {})

    # -- attributes ----------------------------------------------------------------------------

    @property
    def attrs(self) -> Attrs:
        """The attributes, decoded (a change made through the dict is written back)."""
        return Attrs(self, orjson.loads(self.blob))

    def decoded(self) -> dict[str, Any]:
        """A decoded copy of the attributes (changes to it are not written back)."""
        value: dict[str, Any] = orjson.loads(self.blob)
        return value

    @property
    def enc(self) -> _NoEncodings:
        return _NO_ENCODINGS

    def get(self, name: str) -> Any:
        """One attribute: cheap for the hot ones, a decode of the blob for the others."""
        index = _HOT_INDEX.get(self.type, _HOT_INDEX[""]).get(name)
        if index is not None:
            return self.hot[index]
        return self.decoded().get(name)

    def set_attrs(self, attrs: dict[str, Any]) -> None:
        self.blob = exact(orjson.dumps(attrs))
        self.hot = tuple(attrs.get(n) for n in HOT.get(self.type, DEFAULT_HOT))
        self.rev = next(_revisions)

    # -- linkage -------------------------------------------------------------------------------

    @property
    def links(self) -> dict[str, Any]:
        """Owned linkage by relationship name: a list of ids, or an id (or None) for to-one."""
        return {
            n: list(v) if isinstance(v, tuple) else v
            for n, v in zip(LINK_NAMES.get(self.type, ()), self.packed, strict=False)
        }

    def link(self, name: str) -> Any:
        """The owned linkage of `name` (a tuple of ids, an id, or None when not held)."""
        names = LINK_NAMES.get(self.type, ())
        return self.packed[names.index(name)] if name in names else None

    def set_links(self, links: dict[str, Any]) -> None:
        """Replace the owned linkage (names this type does not hold are an error)."""
        names = LINK_NAMES.get(self.type, ())
        unknown = set(links) - set(names)
        if unknown:
            raise KeyError(f"{self.type} holds no linkage {sorted(unknown)}")
        old = dict(zip(names, self.packed, strict=False))
        for n, v in links.items():
            old[n] = (tuple(v) or _EMPTY) if isinstance(v, list | tuple) else v
        self.packed = tuple(old.get(n, None if n in _TO_ONE else _EMPTY) for n in names)
        self.rev = next(_revisions)

    def link_items(self) -> Iterator[tuple[str, Any]]:
        return zip(LINK_NAMES.get(self.type, ()), self.packed, strict=False)

    def copy(self) -> Rec:
        """A copy sharing the (immutable) blob, hot values and linkage tuples."""
        other = Rec.__new__(Rec)
        other.type, other.id, other.mall, other.meta = self.type, self.id, self.mall, self.meta
        other.blob, other.hot, other.packed, other.rev = self.blob, self.hot, self.packed, self.rev
        return other

    def __repr__(self) -> str:
        return f"Rec({self.type!r}, {self.id})"


#: Type codes for packing (type, id) into one integer; ids stay below 2**32.
TYPE_CODES: dict[str, int] = {}
TYPE_NAMES: list[str] = []


def type_code(type_name: str) -> int:
    code = TYPE_CODES.get(type_name)
    if code is None:
        code = TYPE_CODES[type_name] = len(TYPE_NAMES)
        TYPE_NAMES.append(type_name)
    return code


def pack(type_name: str, rid: int) -> int:
    return (type_code(type_name) << 32) | rid


def unpack(code: int) -> tuple[str, int]:
    return TYPE_NAMES[code >> 32], code & 0xFFFFFFFF


class Owners:
    """(type, id) -> the (type, id) of every resource whose links name it.

    Reads as a mapping of sets (`get`, `pop`, `in`); stored as one `array('q')` of packed owners
    per target, keyed by the packed target: ~150 bytes a target instead of ~400 for tuples in
    sets.
    """

    def __init__(self) -> None:
        self._by: dict[int, array[int]] = {}

    def add(self, target: tuple[str, int], owner: tuple[str, int]) -> None:
        key, value = pack(*target), pack(*owner)
        arr = self._by.get(key)
        if arr is None:
            self._by[key] = array("q", (value,))
        elif value not in arr:
            arr.append(value)

    def discard(self, target: tuple[str, int], owner: tuple[str, int]) -> None:
        arr = self._by.get(pack(*target))
        value = pack(*owner)
        if arr is not None and value in arr:
            arr.remove(value)

    def get(
        self, target: tuple[str, int], default: Any = frozenset()
    ) -> set[tuple[str, int]] | Any:
        arr = self._by.get(pack(*target))
        return default if arr is None else {unpack(v) for v in arr}

    def pop(
        self, target: tuple[str, int], default: Any = frozenset()
    ) -> set[tuple[str, int]] | Any:
        arr = self._by.pop(pack(*target), None)
        return default if arr is None else {unpack(v) for v in arr}

    def of_type(self, target: tuple[str, int], owner_type: str) -> list[int]:
        """Sorted ids of the `owner_type` owners of `target`."""
        arr = self._by.get(pack(*target))
        if not arr:
            return []
        code = type_code(owner_type)
        return sorted(v & 0xFFFFFFFF for v in arr if v >> 32 == code)

    def __contains__(self, target: object) -> bool:
        return isinstance(target, tuple) and pack(*target) in self._by

    def __len__(self) -> int:
        return len(self._by)
