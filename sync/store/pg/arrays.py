"""One column of a page as a binary PostgreSQL array, bound as one parameter.

Part of the page write (`sync.store.pg.pagewrite`: why one array per column and no temporary
table). The elements are dumped by each type's binary dumper exactly as a binary `COPY` row's
fields are, by psycopg's C routine `format_row_binary` when it is there. That routine is not
psycopg's public API (it moved from `psycopg.copy` to `psycopg._copy_base` in 3.2), so when
neither place has it the same bytes are made here in Python (`format_fields`, slower, equal:
`tests/unit/store/pg/test_arrays.py` holds the two to each other), and a psycopg release that
moves it again costs speed, never a write.

The ways tried for a page's rows, over the pages `bench/pg_write.py` writes (deals, 50,000 rows in pages of 100, one transaction each; CPU
seconds of the writing process + of the server backend):

- the binary `COPY` into a temporary table made and dropped per page, then the same `INSERT ...
  SELECT` from it, which this replaces: 0.8 + 1.9 s. `CREATE TEMP TABLE` was a third of a page's
  time and left ~51 dead catalog tuples a page (`pg_class`, `pg_attribute`, `pg_type`,
  `pg_depend`) for autovacuum;
- a temporary table made once per connection and column set (`ON COMMIT DELETE ROWS`) and
  reused: 0.5 + 0.55 s, and two round trips a page more than one statement (a COPY has an
  exchange of its own before the merge, and cannot be pipelined);
- `unnest` of arrays psycopg dumps from Python lists (`binary=True` or text): 1.6 + 0.55 s,
  its list dumper a Python call per value;
- the same arrays encoded here: each column's values dumped by its type's binary dumper into
  the array's elements at C speed (`format_row_binary`, what binary COPY runs per row, whose
  fields are laid out as an array's elements are), behind the array's head (`ARRAY_HEAD`): 0.2 +
  0.4 s with `unnest(...)` in `FROM` (which materialises each of them first), 0.2 + 0.3 s in
  the select list (evaluated in step, a row at a time): this.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from psycopg import pq
from psycopg.abc import Transformer as TransformerABC
from psycopg.adapt import Dumper, PyFormat

_FIELDS = struct.Struct("!h")
_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)


def format_fields(
    row: Sequence[Any], tx: TransformerABC, out: bytearray | None = None
) -> bytearray:
    """A binary COPY row of `row` (its field count, then each field's length and bytes, -1 for
    null), dumped by `tx`'s binary dumpers: `format_row_binary` in Python."""
    if out is None:
        out = bytearray()
    out += _FIELDS.pack(len(row))
    for item in tx.dump_sequence(row, [PyFormat.BINARY] * len(row)):
        if item is None:
            out += _NULL
        else:
            out += _LENGTH.pack(len(item))
            out += item
    return out


format_row_binary: Callable[..., Any]
try:  # psycopg >= 3.2; the C implementation when psycopg[binary] is installed
    from psycopg._copy_base import format_row_binary
except ImportError:  # pragma: no cover - psycopg 3.1, or a release that moved it
    try:
        from psycopg.copy import format_row_binary  # type: ignore[attr-defined,no-redef]
    except ImportError:
        format_row_binary = format_fields


class Array:
    """One column of a page as a one-dimensional PostgreSQL array in binary format, encoded by
    `PageWriter` and bound as it is (`ArrayDumper`): a subclass per array type (`array_type`)
    names its oid."""

    __slots__ = ("data",)
    oid: ClassVar[int] = 0

    def __init__(self, data: bytes | bytearray) -> None:
        self.data = data


class ArrayDumper(Dumper):
    """Binds an `Array` as the parameter of its array type, its bytes as they are."""

    format = pq.Format.BINARY

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self.oid = getattr(cls, "oid", 0)

    def dump(self, obj: Any) -> bytes | bytearray:
        data: bytes | bytearray = obj.data
        return data


_ARRAY_TYPES: dict[int, type[Array]] = {}


def array_type(oid: int) -> type[Array]:
    """The `Array` subclass of the array type `oid` (made once)."""
    found = _ARRAY_TYPES.get(oid)
    if found is None:
        found = _ARRAY_TYPES[oid] = type(f"Array{oid}", (Array,), {"__slots__": (), "oid": oid})
    return found


#: The head of a one-dimensional binary array: dimensions, has nulls, element type, length,
#: lower bound; the elements follow, each its length (-1 for null) and bytes, as a binary COPY
#: row's fields are (which `format_row_binary` writes after its field count).
ARRAY_HEAD = struct.Struct("!iiiii")
#: The field count a binary COPY row starts with, dropped from an array's elements.
FIELD_COUNT = 2
