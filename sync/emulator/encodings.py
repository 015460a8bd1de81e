"""Encoded resources: the plain form assembled from templates, the other variants in a bounded LRU.

The plain form of a resource (every attribute, relationships as links only: what a listing
without `include` or `fields` serves) is its type's template with the id put in and the stored
attribute bytes (`Rec.blob`) in the middle: no dict, no `orjson.dumps`, nothing cached, about a
microsecond. Other variants (a sparse fieldset, included linkage, stamps in other forms) are
encoded from the decoded record and kept in an LRU keyed by (type, id, revision, variant) with a
byte budget, so the emulator's memory no longer grows with every variant a client asks for.
"""

from __future__ import annotations

from collections import OrderedDict

import orjson

from sync.emulator.records import exact

#: Default byte budget of the encoding LRU (`ccsync emulator --encoding-cache-mb`).
DEFAULT_BUDGET = 256 * 2**20
_ID = "\x00"  # where a template takes the id (never in a path, a type name or the base URL)


class Templates:
    """Per-type byte templates of the plain form, split where the id goes, for one base URL."""

    def __init__(self, base: str = "") -> None:
        self.base = base
        self._parts: dict[str, tuple[list[bytes], list[bytes]]] = {}

    def parts(
        self, type_name: str, path: str, rels: tuple[str, ...], meta: object
    ) -> tuple[list[bytes], list[bytes]]:
        """(head, tail): `id.join(head)` + blob + `id.join(tail)` is the plain form."""
        cached = self._parts.get(type_name)
        if cached is None:
            base = self.base
            head = f'{{"id":"{_ID}","type":"{type_name}","links":{{"self":"{base}/{path}/{_ID}"}},'
            head += '"attributes":'
            tail = ""
            if rels:
                items = []
                for name in rels:
                    hy = name.replace("_", "-")
                    items.append(
                        f'"{name}":{{"links":{{"self":"{base}/{path}/{_ID}/relationships/{hy}",'
                        f'"related":"{base}/{path}/{_ID}/{hy}"}}}}'
                    )
                tail += ',"relationships":{' + ",".join(items) + "}"
            if meta:
                tail += ',"meta":' + orjson.dumps(meta).decode()
            tail += "}"
            mark = _ID.encode()
            cached = (head.encode().split(mark), tail.encode().split(mark))
            self._parts[type_name] = cached
        return cached


class Encodings:
    """Encoded resource variants by (type, id, revision, variant), least recently used first out
    once `budget` bytes are held."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.used = 0
        self.hits = 0
        self.misses = 0
        self._blobs: OrderedDict[tuple[str, int, int, str], bytes] = OrderedDict()

    def get(self, key: tuple[str, int, int, str]) -> bytes | None:
        blob = self._blobs.get(key)
        if blob is None:
            self.misses += 1
            return None
        self.hits += 1
        self._blobs.move_to_end(key)
        return blob

    def put(self, key: tuple[str, int, int, str], blob: bytes) -> None:
        if len(blob) > self.budget or key in self._blobs:
            return
        self._blobs[key] = exact(blob)
        self.used += len(blob)
        while self.used > self.budget:
            _, old = self._blobs.popitem(last=False)
            self.used -= len(old)

    def clear(self) -> None:
        self._blobs.clear()
        self.used = 0

    def __len__(self) -> int:
        return len(self._blobs)
