"""Reads of one type's table in PostgreSQL: counts, ids in order, stamps, single rows, and the
mall-scoped reads through its memberships.

Issue #49, the counterpart of `sync.store.reads` (the functions `count`, `ids`, `stamps`,
`get`), of the reads of `sync.store.memberships` (`count_in_mall`, `ids_in_mall`, `malls_of`,
`busiest`, `orphans`) and of the read methods of `sync.store.table.TypeTable` (`TypeReads`:
`exists`, `count`, `ids`, `stamps`, `get`, `listing`, `orphans`, `by_mall`, `malls_of`,
`busiest_malls`), with the same arguments, order and answers, held to them by the contract
tests of `tests/unit/store/pg/test_reads.py`. Not wired into `Mirror` yet.

**As in SQLite.** Every read streams or chunks: `ids` walks a table by keyset, 1,000 ids a
query, and `stamps` asks 1,000 ids a query (`= ANY`: PostgreSQL has no SQLite bound-parameter
limit, but a statement stays small). A table that does not exist reads as empty (asked of the
catalogue, `sync.store.pg.schema`: a failed statement would abort the caller's transaction).
Reads scoped to a mall go through its memberships (`malls_<type>`, named and shaped as
SQLite's: `sync.store.memberships`), not the rows' `mall_id`. No read commits or begins
anything of its own.

**A row as SQLite gives it.** `get` answers what the SQLite mirror's `get` answers, since the
core above both stores reads it (`sync.jobs.incremental.queueworker`) and every value the core
sees is in SQLite's types (`sync.pipeline.encoding`): a `boolean` column reads as 0 or 1 (an
int, not a bool: one JSON export or equality test reads the same from both mirrors), a `jsonb`
value as staging encodes one for SQLite (`sync.pipeline.encoding.encode`): an object or array as
its compact JSON text, a string or number (stored as a JSON scalar) as itself. Integers,
`double precision` (SQLite's REAL: 40 reads back as 40.0), text and NULL need nothing.

**Differences that stay.** A jsonb object comes back with its keys in jsonb's order (shorter
keys first, then byte order; a key given twice only once), so its text can differ from
SQLite's while the JSON it holds is equal. `busiest` orders malls whose rows have no stamp last,
as SQLite orders NULL below every stamp (`DESC NULLS LAST`), and malls of the same newest
stamp by id, where SQLite leaves their order to its sorter.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from psycopg import sql
from psycopg.rows import tuple_row

from sync.pipeline.encoding import encode
from sync.store import memberships
from sync.store.pg.bookkeeping import exists
from sync.store.pg.listing import FIRST, Listing
from sync.store.pg.schema import Schema

#: Ids a keyset query of `ids` returns, and ids a query of `stamps` or `by_mall` asks.
CHUNK = 1000
#: Type oids whose values `get` gives in SQLite's types: boolean -> 0/1, json/jsonb -> as staged.
BOOL_OID = 16
JSON_OIDS = frozenset({114, 3802})


def _rows(schema: Schema, query: sql.Composed, params: Sequence[Any] = ()) -> list[Any]:
    """Every row of `query` as tuples, whatever the connection's row factory."""
    return schema.conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()


def _table(schema: Schema, name: str) -> sql.Identifier:
    return sql.Identifier(schema.name, name)


def _member_table(schema: Schema, type_name: str) -> str | None:
    """The membership table of `type_name` when it exists (a table: a view does not count, as
    `sync.store.memberships` asks `sqlite_master` for a table)."""
    name = memberships.table(type_name)
    return name if exists(schema.conn, schema.name, name) else None


def _keyset(
    schema: Schema, query: sql.Composed, params: tuple[int, ...], start: int, batch: int
) -> Iterator[list[int]]:
    """Batches of the ids `query` selects after the last one yielded (`query` takes `params`,
    then the last id, then the batch size), each read whole before it is yielded; the last is
    the first shorter than `batch` (`sync.store.memberships._keyset`)."""
    last = start
    while True:
        found = [int(r[0]) for r in _rows(schema, query, (*params, last, batch))]
        if found:
            yield found
        if len(found) < batch:
            return
        last = found[-1]


# -- `sync.store.reads` ------------------------------------------------------------------------


def count(schema: Schema, type_name: str, mall_id: int | None) -> int:
    if not schema.columns(type_name):
        return 0
    if mall_id is None:
        query = sql.SQL("SELECT count(*) FROM {}").format(_table(schema, type_name))
        return int(_rows(schema, query)[0][0])
    return count_in_mall(schema, type_name, mall_id)


def ids(schema: Schema, type_name: str, mall_id: int | None, after: int | None) -> Iterator[int]:
    """Ids of a table in order (those greater than `after`, when given), 1,000 at a time."""
    if not schema.columns(type_name):
        return
    if mall_id is not None:
        yield from ids_in_mall(schema, type_name, mall_id, after)
        return
    query = sql.SQL("SELECT id FROM {} WHERE id > %s ORDER BY id LIMIT %s").format(
        _table(schema, type_name)
    )
    for chunk in _keyset(schema, query, (), FIRST if after is None else after, CHUNK):
        yield from chunk


def stamps(schema: Schema, type_name: str, wanted: Sequence[int]) -> dict[int, str | None]:
    """`updated_at` of those of `wanted` the table holds (None for a type without one)."""
    cols = schema.columns(type_name)
    if not cols or not wanted:
        return {}
    stamp = sql.Identifier("updated_at") if "updated_at" in cols else sql.SQL("NULL")
    query = sql.SQL("SELECT id, {} FROM {} WHERE id = ANY(%s::bigint[])").format(
        stamp, _table(schema, type_name)
    )
    out: dict[int, str | None] = {}
    for start in range(0, len(wanted), CHUNK):
        for rid, updated in _rows(schema, query, (list(wanted[start : start + CHUNK]),)):
            out[int(rid)] = updated
    return out


def get(schema: Schema, type_name: str, rid: int) -> dict[str, Any] | None:
    """One row as a dict of its columns, in SQLite's types (see the module's docstring); None:
    no such row or table."""
    if not schema.columns(type_name):
        return None
    cur = schema.conn.cursor(row_factory=tuple_row)
    cur.execute(sql.SQL("SELECT * FROM {} WHERE id = %s").format(_table(schema, type_name)), (rid,))
    row = cur.fetchone()
    if row is None or cur.description is None:
        return None
    out: dict[str, Any] = {}
    for column, value in zip(cur.description, row, strict=True):
        if value is not None and column.type_code == BOOL_OID:
            value = int(value)
        elif value is not None and column.type_code in JSON_OIDS:
            value = encode(value)  # as staged: an object or array as JSON text
        out[column.name] = value
    return out


# -- the reads of `sync.store.memberships` -------------------------------------------------------


def count_in_mall(schema: Schema, type_name: str, mall_id: int) -> int:
    """How many rows the membership table gives `mall_id`."""
    members = _member_table(schema, type_name)
    if members is None:
        return 0
    mall, _ = memberships.columns(type_name)
    query = sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
        _table(schema, members), sql.Identifier(mall)
    )
    return int(_rows(schema, query, (mall_id,))[0][0])


def ids_in_mall(
    schema: Schema, type_name: str, mall_id: int, after: int | None = None
) -> Iterator[int]:
    """Ids the membership table holds for `mall_id`, in order (those greater than `after`),
    streamed."""
    members = _member_table(schema, type_name)
    if members is None:
        return
    mall, row = (sql.Identifier(c) for c in memberships.columns(type_name))
    query = sql.SQL(
        "SELECT {row} FROM {t} WHERE {mall} = %s AND {row} > %s ORDER BY {row} LIMIT %s"
    ).format(row=row, t=_table(schema, members), mall=mall)
    start = FIRST if after is None else after
    for chunk in _keyset(schema, query, (mall_id,), start, CHUNK):
        yield from chunk


def malls_of(schema: Schema, type_name: str, rid: int) -> list[int]:
    """The malls the membership table holds for one row, ascending."""
    members = _member_table(schema, type_name)
    if members is None:
        return []
    mall, row = (sql.Identifier(c) for c in memberships.columns(type_name))
    query = sql.SQL("SELECT {mall} FROM {t} WHERE {row} = %s ORDER BY 1").format(
        mall=mall, t=_table(schema, members), row=row
    )
    return [int(r[0]) for r in _rows(schema, query, (rid,))]


def by_mall(schema: Schema, type_name: str, wanted: Iterable[int]) -> dict[int, list[int]]:
    """`wanted` grouped by each mall that lists them (a row in several malls is in each, in the
    order given), malls ascending; asked `CHUNK` ids a query rather than a query per id."""
    order = [int(i) for i in wanted]
    members = _member_table(schema, type_name)
    if members is None or not order:
        return {}
    mall, row = (sql.Identifier(c) for c in memberships.columns(type_name))
    query = sql.SQL("SELECT {row}, {mall} FROM {t} WHERE {row} = ANY(%s::bigint[])").format(
        row=row, mall=mall, t=_table(schema, members)
    )
    unique = list(dict.fromkeys(order))
    malls: dict[int, list[int]] = {}
    for start in range(0, len(unique), CHUNK):
        for rid, m in _rows(schema, query, (unique[start : start + CHUNK],)):
            malls.setdefault(int(rid), []).append(int(m))
    out: dict[int, list[int]] = {}
    for rid in order:
        for m in malls.get(rid, ()):
            out.setdefault(m, []).append(rid)
    return dict(sorted(out.items()))


def busiest(schema: Schema, type_name: str, n: int) -> list[int]:
    """The `n` malls whose rows of `type_name` changed last (the newest `updated_at` of a row
    they list first): where a new row of the type most likely is."""
    members = _member_table(schema, type_name)
    if n <= 0 or members is None or not exists(schema.conn, schema.name, type_name):
        return []
    mall, row = (sql.Identifier(c) for c in memberships.columns(type_name))
    query = sql.SQL(
        "SELECT m.{mall} FROM {m} m JOIN {t} t ON t.id = m.{row} GROUP BY m.{mall}"
        ' ORDER BY max(t.updated_at COLLATE "C") DESC NULLS LAST, m.{mall} LIMIT %s'
    ).format(mall=mall, m=_table(schema, members), t=_table(schema, type_name), row=row)
    return [int(r[0]) for r in _rows(schema, query, (n,))]


def orphans(schema: Schema, type_name: str, batch: int = 100) -> Iterator[list[int]]:
    """Batches of rows of `type_name` that no mall lists (each batch read whole first)."""
    members = _member_table(schema, type_name)
    if members is None or not exists(schema.conn, schema.name, type_name):
        return
    _, row = memberships.columns(type_name)
    query = sql.SQL(
        "SELECT id FROM {t} t WHERE NOT EXISTS (SELECT 1 FROM {m} m WHERE m.{row} = t.id)"
        " AND id > %s ORDER BY id LIMIT %s"
    ).format(t=_table(schema, type_name), m=_table(schema, members), row=sql.Identifier(row))
    yield from _keyset(schema, query, (), FIRST, batch)


# -- the handle: `TypeTable`'s reads -------------------------------------------------------------

#: Told a mall-scoped type's name, makes its membership table (the memberships part's).
EnsureMemberships = Callable[[str], None]

#: Numbers the temporary tables of listings (`TypeReads.listing`): unique within the process.
_LISTINGS = itertools.count(1)


class TypeReads:
    """The reads of one type's table (or any table's: a membership table counts too) on one
    PostgreSQL mirror, as `sync.store.table.TypeTable` has them. A small value built per call,
    like `TypeTable`: it holds nothing but what it was given. `ensure_memberships` is what
    `listing(mall_id)` calls first, as `TypeTable.listing` calls `memberships.ensure`."""

    __slots__ = ("ensure_memberships", "name", "schema")

    def __init__(
        self, schema: Schema, name: str, ensure_memberships: EnsureMemberships | None = None
    ) -> None:
        self.schema = schema
        self.name = name
        self.ensure_memberships = ensure_memberships

    def __repr__(self) -> str:
        return f"<pg TypeReads {self.schema.name}.{self.name}>"

    @property
    def exists(self) -> bool:
        return self.schema.has_table(self.name)

    def count(self, *, mall_id: int | None = None) -> int:
        """Rows of the table, or of one mall (its memberships); 0 before the table exists."""
        return count(self.schema, self.name, mall_id)

    def ids(self, *, mall_id: int | None = None, after: int | None = None) -> Iterator[int]:
        """Ids of the table in order (those greater than `after`, when given), streamed in
        chunks (never the whole table in memory)."""
        return ids(self.schema, self.name, mall_id, after)

    def stamps(self, ids: Sequence[int]) -> dict[int, str | None]:
        """`updated_at` of those of `ids` the table holds (normalised as written, so it
        compares as text with `sync.model.stamps.normalize`d stamps; None without one)."""
        return stamps(self.schema, self.name, ids)

    def get(self, id: int) -> dict[str, Any] | None:
        """One row as a dict of its columns, in SQLite's types (None: no such row or table)."""
        return get(self.schema, self.name, id)

    def listing(self, mall_id: int | None = None) -> Listing:
        """A temporary id listing of this type (in one mall) to diff against the table."""
        if mall_id is not None and self.ensure_memberships is not None and self.exists:
            self.ensure_memberships(self.name)
        name = f"_sync_listing_{os.getpid()}_{next(_LISTINGS)}"
        return Listing(self.schema.conn, self.name, mall_id, name, self.schema.name)

    def malls_of(self, rid: int) -> list[int]:
        """The malls whose routes list a mall-scoped row (its memberships), ascending."""
        return malls_of(self.schema, self.name, rid)

    def busiest_malls(self, n: int) -> list[int]:
        """The `n` malls whose rows of this type changed last (`busiest`)."""
        if "updated_at" not in self.schema.columns(self.name):
            return []
        return busiest(self.schema, self.name, n)

    def by_mall(self, ids: Iterable[int]) -> dict[int, list[int]]:
        """`ids` grouped by each mall that lists them (a row in several malls is in each),
        malls ascending."""
        return by_mall(self.schema, self.name, ids)

    def orphans(self) -> Iterator[list[int]]:
        """Batches of a mall-scoped type's rows that no mall lists."""
        return orphans(self.schema, self.name)
