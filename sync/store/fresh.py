"""Which ids of the tables this process created it has written: the others cannot exist yet.

A page write asks, for every owner of links in a batch, whether the row existed before this
upsert: an owner that did not cannot have links to delete first, nor a stored `updated_at` for
the guard to compare (`PageWriter.link_guard`, `sync.store.pagewrite`). For a table the mirror
created itself (the tables of a first backfill), the answer needs no query: a content row only
ever enters through the page write, which records its id first, and link rows with their
owner's upsert or through the mirror's table handle, which records the owner first (`add`) when
it writes links without the row: a relationship's own route (`replace_links`), a mall's
(`replace_mall_links`, `settle_mall_links`: `malls_contacts` is the malls' `contacts` linkage).
The mirror hands its page writer and its table handles one `FreshIds`. So an id never recorded
has neither row nor links. A to-one column (`set_to_one`, `write_to_one`) and a reconcile's
links (`write_sideloads`) are written only for owners the table holds, recorded by their upsert.
Two queries a batch (the guard's SELECT and one DELETE per link table, ~0.3 ms a page at 200k)
become a bit test per owner.

One bit per id, so memory follows the largest id, not the rows: 125 KB for ids up to a million,
at most `LIMIT / 8` bytes (2 MiB) a table. An id at or above `LIMIT`, or negative, or in a table
the mirror found already there (a resumed backfill, a daemon), is "unknown": the caller queries
as before. A bit is never cleared (a deleted row, a rolled-back group): a stale bit only means
"may exist", which costs the query and is always safe.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Ids tracked per table: [0, LIMIT). 2 MiB of bits a table at most.
LIMIT = 1 << 24


class FreshIds:
    """Per tracked table, a bitmap of the ids this process has written to it: rows, or
    links without their row."""

    def __init__(self) -> None:
        self._bits: dict[str, bytearray] = {}

    def track(self, table: str) -> None:
        """`table` was just created (empty) by this process: from now on every id written to
        it is recorded, so an unrecorded one is known absent."""
        self._bits[table] = bytearray()

    def tracked(self, table: str) -> bool:
        return table in self._bits

    def add(self, table: str, ids: Iterable[int]) -> None:
        """Record `ids` as (possibly) present in `table`; call before or with their upsert, or
        before writing their links without it."""
        bits = self._bits.get(table)
        if bits is None:
            return
        for i in ids:
            if 0 <= i < LIMIT:
                byte = i >> 3
                if byte >= len(bits):  # grow geometrically: ids arrive in no particular order
                    bits.extend(bytes(max(byte + 1 - len(bits), len(bits), 1024)))
                bits[byte] |= 1 << (i & 7)

    def absent(self, table: str, ids: Iterable[int]) -> set[int]:
        """Those of `ids` known to have no row in `table` (never written by this process to a
        table it created); empty when `table` is not tracked."""
        bits = self._bits.get(table)
        if bits is None:
            return set()
        size = len(bits)
        return {
            i
            for i in ids
            if 0 <= i < LIMIT and ((i >> 3) >= size or not (bits[i >> 3] >> (i & 7)) & 1)
        }
