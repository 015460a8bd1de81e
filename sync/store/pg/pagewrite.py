"""The page write into PostgreSQL: a staged batch merged into its table by one guarded `INSERT
... ON CONFLICT`, its rows bound as one binary array per column; one transaction per page, or a
group of pages to one when a bulk load says so (`sync.store.pg.bulk.PgGroup`).

Issue #49, item 2, and the first part of the PostgreSQL mirror: not wired into `Mirror` yet (no
tombstones here; the change feed's triggers are the store's to make, `sync.store.pg.changes`).
The rows arrive staged exactly as for SQLite (`sync.pipeline.batches.Staged`); this module binds
them and never stages them itself.

**A page** (`ensure_page`, then `write_page`): every batch's rows and the links of the rows the
guard lets through (SQLite's rule: an older copy changes neither a row nor its links; asked
after the upsert, `sync.store.pg.linkwrite`), then the listing mall's memberships of the
listed type's rows, in one transaction; links and memberships are written only where they differ (`sync.store.pg.links`,
`sync.store.pg.memberships`), so an unchanged page leaves no dead tuple in the mirror's tables.

**The guard** is the SQLite page write's (`sync.store.pagewrite`), with one deliberate
difference. A copy is written when its `updated_at` is newer than the stored one; an older copy
never is, and a stored stamp wins over a missing one; a stored row without a stamp takes any
copy whose content differs. At an *equal* stamp SQLite writes the copy again (`>=`: a page and a
webhook fetch racing on one version leave the same row either way), while here it is written
only when its content differs (`IS DISTINCT FROM` over the batch's columns): what the issue
asks, since an equal stamp with other content is a real change (an upstream that edits without
touching `updated_at`), and rewriting an unchanged row in PostgreSQL leaves a dead tuple behind
(bloat and vacuum work on every unchanged page of a second pass). A batch without `updated_at`
(tags, groups) is written by content alone. `mall_id` of a mall-scoped row is the lowest mall
that lists it (`LEAST`, which like the SQLite `CASE` ignores a NULL), and the content compare
sees that value, so a row listed again by a higher mall is not rewritten. Duplicate ids in one
batch are reduced first to the copy SQLite's row-by-row upsert would have left.

**The write** is one statement per batch: `INSERT INTO t SELECT ... FROM (SELECT unnest(%s)
AS id, unnest(%s) AS title, ...) AS s ORDER BY id ON CONFLICT (id) DO UPDATE ... WHERE <guard>`
(`sync.store.pg.upsert`), each column's values one parameter, a one-dimensional array of the
column's type (`Array`); a batch whose every id is known absent (`FreshIds`: a first backfill)
gets the same statement without its `ON CONFLICT` (`insert_sql`). Keys are taken in id order,
so two writers never deadlock. On an idle connection in autocommit the statement is its own
transaction, one round trip with its commit; inside a caller's page transaction it is a part of
it, with no savepoint (one statement cannot half-apply; its failure fails the page). Its count
is of rows inserted or updated; a row the guard refuses is locked, never rewritten (its `xmin`
stays). The ways tried, and what each cost, are `sync.store.pg.arrays`'.

A page costs the server about twice what a bare COPY of its rows does: the merge's index
probe, speculative insert and its confirmation for each row (three WAL records), where COPY only
inserts. Client-side, the statement is rendered once per table and column set (psycopg would compose a
`sql.Composed` again on every execute) and prepared by psycopg after a few uses; a page's text
columns are checked at C speed and bound as staged when every value is a string without NUL
(`plain_texts`), converted one value at a time otherwise.

**Group commit**, several pages to one pipelined transaction in a bulk load, is
`sync.store.pg.bulk.PgGroup`'s (`docs/benchmarks.md` has its figures).

**Schema.** `ensure` creates the schema and table (`id bigint PRIMARY KEY` and the batch's
columns) and adds or widens columns in a transaction of its own before the page's, as the
SQLite store changes its schema first; which type each column takes is `sync.store.pg.columns`'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import abc, pq, sql
from psycopg.adapt import Transformer

from sync.pipeline.batches import Staged
from sync.store.fresh import FreshIds
from sync.store.pg import changes, links, linkwrite, memberships
from sync.store.pg.arrays import (
    ARRAY_HEAD,
    FIELD_COUNT,
    Array,
    ArrayDumper,
    array_type,
    format_row_binary,
)
from sync.store.pg.bookkeeping import create_schema
from sync.store.pg.columns import (
    CONVERT,
    UPDATED_AT,
    WIDER,
    Column,
    alter_columns,
    declared,
    inferred,
    latest_copies,
    plain_texts,
    to_text,
    usable,
)
from sync.store.pg.upsert import insert_sql, upsert_sql


@dataclass(frozen=True)
class Binding:
    """How a batch of one table and column set is bound (`PageWriter.statement`)."""

    #: The guarded upsert, as sent (psycopg would compose a `sql.Composed` again each time).
    statement: bytes
    #: The plain insert of rows known absent (`sync.store.pg.upsert.insert_sql`).
    insert: bytes
    #: A batch's row less the columns the table lacks (None: it has them all).
    take: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    #: The position of `updated_at` in a row as bound, if any.
    stamp: int | None
    #: Per bound column, id first: its type's oid and its `Array` type.
    oids: tuple[int, ...]
    arrays: tuple[type[Array], ...]
    #: The positions of text columns (`to_text`, `plain_texts`) and of the other conversions.
    texts: tuple[int, ...]
    converts: tuple[tuple[int, Callable[[Any], Any]], ...]


def _getter(
    columns: tuple[str, ...], kept: tuple[str, ...]
) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A row of a batch of `columns` (id first) as the tuple of its id and `kept` columns."""
    positions = (0, *(columns.index(c) + 1 for c in kept))
    if len(positions) == 1:
        return lambda row: (row[0],)
    getter: Callable[[tuple[Any, ...]], tuple[Any, ...]] = itemgetter(*positions)
    return getter


class PageWriter:
    """Writes staged batches into the tables of one PostgreSQL schema over one connection: the
    columns it has read or made (cached per table) and the upsert statements it built."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str, *, bulk: bool = False) -> None:
        self.conn = conn
        self.schema = schema
        #: A bulk load: no `links` entries in the feed, no triggers on membership tables made
        #: (its feed is one `backfill` entry per type, `sync.store.pg.changes.note_backfill`).
        self.bulk = bulk
        self._columns: dict[str, dict[str, Column]] = {}
        #: Per table and batch columns: how such a batch is bound (`_binding`).
        self._bindings: dict[tuple[str, tuple[str, ...]], Binding] = {}
        #: Per (element type, length): a transformer dumping that many values of the type.
        self._dumpers: dict[tuple[int, int], abc.Transformer] = {}
        #: Ids written to the tables this writer created, and owners whose links the mirror's
        #: table handles wrote (`sync.store.fresh`): others need no guard's read nor held lists.
        self.fresh = FreshIds()
        conn.adapters.register_dumper(Array, ArrayDumper)

    def columns(self, table: str) -> dict[str, Column]:
        """The columns of `table` in this schema, by name (empty when it does not exist)."""
        found = self._columns.get(table)
        if found is None:
            rows = self.conn.execute(
                "SELECT a.attname, a.atttypid::int, format_type(a.atttypid, a.atttypmod),"
                " t.typarray::int"
                " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " JOIN pg_type t ON t.oid = a.atttypid"
                " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')"
                " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                (self.schema, table),
            ).fetchall()
            found = {name: Column(oid, typ, array) for name, oid, typ, array in rows}
            if found:
                self._columns[table] = found
        return found

    def forget(self, table: str) -> None:
        """Drop the cached columns of `table` (after a change made outside this writer), and
        how its batches were bound."""
        self._columns.pop(table, None)
        for key in [k for k in self._bindings if k[0] == table]:
            del self._bindings[key]

    def write(self, b: Staged) -> int:
        """`ensure` the batch's table and columns, then `upsert` its rows: how many were
        inserted or updated."""
        self.ensure(b)
        return self.upsert(b)

    def changes_schema(self, b: Staged) -> bool:
        """Whether `ensure` would change the schema for the batch: its table to make, a column
        to add or to widen (from the columns cached, or read once)."""
        if not b.ids:
            return False
        have, add, widen = self._schema_changes(b)
        return not have or bool(add or widen)

    def _schema_changes(
        self, b: Staged
    ) -> tuple[dict[str, Column], list[tuple[str, str]], list[tuple[str, str]]]:
        """The batch table's columns, the columns to add and those to widen, each with its
        type."""
        table = b.type
        have = self.columns(table)
        add: list[tuple[str, str]] = []
        widen: list[tuple[str, str]] = []
        for pos, col in enumerate(b.columns, start=1):
            current = have.get(col)
            if current is None:
                if not usable(col):
                    continue
                typ = declared(table, col) or inferred(row[pos] for row in b.rows)
                if typ is not None:  # all null: made once a value comes
                    add.append((col, typ))
            elif current.type in WIDER[:-1] and declared(table, col) is None:
                need = inferred(row[pos] for row in b.rows)
                if need is not None and WIDER.index(need) > WIDER.index(current.type):
                    widen.append((col, need))
        return have, add, widen

    def ensure(self, b: Staged) -> None:
        """Create the batch's table, add the columns it lacks and widen inferred ones a value
        does not fit, in one transaction of its own: call it outside the page's transaction."""
        if not b.ids:
            return
        table = b.type
        have, add, widen = self._schema_changes(b)
        if have and not add and not widen:
            return
        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise RuntimeError(
                f"{self.schema}.{table}: a PostgreSQL page write changes the schema outside "
                "the page's transaction (ensure the batches before it)"
            )
        target = sql.Identifier(self.schema, table)
        try:
            with self.conn.transaction():
                if not have:
                    # The key alone, then every column as added: a table another writer made
                    # meanwhile gets the columns it lacks all the same.
                    create_schema(self.conn, self.schema)
                    self.conn.execute(
                        sql.SQL("CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY)").format(
                            target
                        ),
                        prepare=False,
                    )
                    if self._empty(b):
                        # Empty, and no link rows: every id of a row or link it gets from now
                        # on is recorded first (`FreshIds`: here, or by the table handles).
                        self.fresh.track(table)
                alter_columns(self.conn, target, add, widen)
        finally:
            self.forget(table)

    def _empty(self, b: Staged) -> bool:
        """Whether the batch's table and its type's link tables hold no row (made IF NOT EXISTS)."""
        found = self.conn.execute(
            sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(self.schema, b.type))
        ).fetchone()
        return found is None and links.none_held(self.conn, self.schema, b.rtype)

    def upsert(self, b: Staged) -> int:
        """Merge the batch into its table under the guard, in one statement: how many rows were
        inserted or updated. On an idle connection in autocommit the statement is its own
        transaction (one round trip); inside a caller's transaction it is a part of it (a
        failure fails the caller's transaction, the page). The table must exist (`ensure`); a
        batch column it lacks (all null when ensured, or not `usable`) is left out."""
        page = self._bound(b)
        if page is None:
            return 0
        statement, params = page
        conn = self.conn
        if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            # In a pipeline (a page of a `PgGroup`): the count once the server has answered.
            with conn.pipeline():
                cur = conn.execute(statement, params)
            return cur.rowcount
        if conn.autocommit or conn.info.transaction_status != pq.TransactionStatus.IDLE:
            return conn.execute(statement, params).rowcount
        with conn.transaction():
            return conn.execute(statement, params).rowcount

    def send(self, b: Staged) -> psycopg.Cursor[Any] | None:
        """`upsert`'s statement executed on a new cursor, which is returned unread (None for an
        empty batch): in pipeline mode (`PgGroup`) the statement is sent and the next page
        encoded while the server runs it; its `rowcount` is known once the pipeline syncs."""
        page = self._bound(b)
        if page is None:
            return None
        cur = self.conn.cursor()
        cur.execute(*page)
        return cur

    def _bound(self, b: Staged) -> tuple[bytes, list[Array]] | None:
        """`statement` for the batch about to be sent, the plain insert when every id is known
        absent; its ids recorded as written (`FreshIds`), whatever the statement."""
        ids = set(b.ids)
        absent = bool(ids) and len(self.fresh.absent(b.type, ids)) == len(ids)
        self.fresh.add(b.type, b.ids)
        return self.statement(b, absent=absent)

    def statement(self, b: Staged, *, absent: bool = False) -> tuple[bytes, list[Array]] | None:
        """The batch's guarded upsert (`upsert_sql`; `absent`, every id known absent: the plain
        `insert_sql`) and its parameters, one binary array per column (None for an empty
        batch): the rows reduced to one copy per id in id order (`latest_copies`) and
        converted as their columns take them (`CONVERT`)."""
        if not b.ids:
            return None
        bound = self._binding(b)
        rows = latest_copies(
            list(b.rows) if bound.take is None else [bound.take(r) for r in b.rows], bound.stamp
        )
        values: list[Sequence[Any]] = list(zip(*rows, strict=True))
        texts = bound.texts
        if texts and not plain_texts(chain.from_iterable(values[i] for i in texts)):
            for i in texts:
                if not plain_texts(values[i]):
                    values[i] = [None if v is None else to_text(v) for v in values[i]]
        for i, convert in bound.converts:
            values[i] = [None if v is None else convert(v) for v in values[i]]
        n = len(rows)
        return bound.insert if absent else bound.statement, [
            self._array(column, oid, kind, n)
            for column, oid, kind in zip(values, bound.oids, bound.arrays, strict=True)
        ]

    def _binding(self, b: Staged) -> Binding:
        """How a batch of `b`'s table and columns is bound (worked out once for each)."""
        key = (b.type, b.columns)
        found = self._bindings.get(key)
        if found is not None:
            return found
        have = self.columns(b.type)
        if not have:
            raise RuntimeError(f"{self.schema}.{b.type}: no such table (ensure the batch first)")
        cols = tuple(c for c in b.columns if c in have)
        types = [have[c] for c in ("id", *cols)]
        found = self._bindings[key] = Binding(
            statement=upsert_sql(self.schema, b.type, cols).as_bytes(self.conn),
            insert=insert_sql(self.schema, b.type, cols).as_bytes(self.conn),
            take=None if len(cols) == len(b.columns) else _getter(b.columns, cols),
            stamp=cols.index(UPDATED_AT) + 1 if UPDATED_AT in cols else None,
            oids=tuple(t.oid for t in types),
            arrays=tuple(array_type(t.array_oid) for t in types),
            texts=tuple(i for i, t in enumerate(types) if CONVERT.get(t.oid) is to_text),
            converts=tuple(
                (i, f)
                for i, t in enumerate(types)
                if (f := CONVERT.get(t.oid)) is not None and f is not to_text
            ),
        )
        return found

    def array(self, values: Sequence[Any], col: Column) -> Array:
        """`values` as a binary array of `col`'s type (see `_array`)."""
        return self._array(values, col.oid, array_type(col.array_oid), len(values))

    def _array(self, values: Sequence[Any], oid: int, kind: type[Array], n: int) -> Array:
        """The `n` `values` as a binary array of type `kind` (elements of type `oid`), each
        dumped as binary COPY would dump it (its type's dumper, at C speed:
        `format_row_binary`)."""
        dumpers = self._dumpers.get((oid, n))
        if dumpers is None:
            if len(self._dumpers) > 256:  # lengths seen are few (a page's size, the last page's)
                self._dumpers.clear()
            dumpers = self._dumpers[oid, n] = Transformer.from_context(self.conn)
            dumpers.set_dumper_types([oid] * n, pq.Format.BINARY)
        out = bytearray(ARRAY_HEAD.pack(1, 1 if None in values else 0, oid, n, 1))
        format_row_binary(values, dumpers, out)
        del out[ARRAY_HEAD.size : ARRAY_HEAD.size + FIELD_COUNT]
        return kind(out)

    def ensure_page(self, batches: Sequence[Staged]) -> None:
        """`ensure` each batch, the link tables its linkage names, and the membership table of
        a mall's listing of a mall-scoped type: before the page's transaction, as `ensure`."""
        for b in batches:
            self.ensure(b)
            names = self._missing_link_tables(b)
            if names:
                links.ensure(self.conn, self.schema, b.rtype, names, index=not self.bulk)
        if self._missing_memberships(batches):
            memberships.ensure(self.conn, self.schema, batches[0].type, bulk=self.bulk)

    def page_changes_schema(self, batches: Sequence[Staged]) -> bool:
        """Whether `ensure_page` would change the schema for the page."""
        return self._missing_memberships(batches) or any(
            self.changes_schema(b) or self._missing_link_tables(b) for b in batches
        )

    def _missing_link_tables(self, b: Staged) -> list[str]:
        """The relationships of the batch's linkage whose link tables do not exist yet."""
        return [
            lt.relationship.name
            for lt in b.rtype.link_tables
            if lt.relationship.name in b.links and not self.columns(lt.table)
        ]

    def _missing_memberships(self, batches: Sequence[Staged]) -> bool:
        """Whether the page is a mall's listing of a mall-scoped type without its membership
        table yet."""
        main = batches[0] if batches else None
        return (
            main is not None
            and main.rtype.level == "mall"
            and "mall_id" in main.columns
            and not self.columns(memberships.table(main.type))
        )

    def write_page(self, batches: Sequence[Staged]) -> int:
        """A page in one transaction (a savepoint inside a caller's): each batch's rows under
        the guard and the links of those it lets through, in the page's order (the listed type
        first, as SQLite), then the listing mall's memberships. `ensure_page` first. Returns
        the rows inserted or updated."""
        with self.conn.transaction():
            return self.page_writes(batches)

    def page_writes(self, batches: Sequence[Staged]) -> int:
        """`write_page`'s writes in the transaction the connection holds (a `PgGroup`'s: no
        savepoint per page): the rows inserted or updated."""
        written = sum(self.write_rows(b) for b in batches)
        if batches:
            self.write_memberships(batches[0])
        return written

    def write_rows(self, b: Staged, *, count: bool = True) -> int:
        """One batch's rows under the guard and the links of those it lets through, in the
        caller's transaction: the rows inserted or updated (0 unless `count`: in pipeline mode
        counting waits for the server, so a caller that needs no count sends the upsert and
        goes on). The links follow the upsert and ask what it left (`linkwrite`'s guard)."""
        new = self.fresh_owners(b)  # before the upsert records the batch's ids
        notes = self.feed_notes() if b.links else None  # before the upsert, as SQLite
        if count:
            written = self.upsert(b)
        else:
            written = 0
            self.send(b)
        linkwrite.write(
            self.conn, self.schema, b.rtype, b.links, new, notes=notes, stamps=self._stamps(b)
        )
        return written

    def write_memberships(self, b: Staged) -> None:
        """The mall that listed a page's rows lists them: one (mall, row) pair each."""
        if b.rtype.level != "mall" or not b.ids or "mall_id" not in b.columns:
            return
        pos = b.columns.index("mall_id") + 1
        pairs = [(row[pos], row[0]) for row in b.rows if row[pos] is not None]
        memberships.add(self.conn, self.schema, b.type, pairs)

    def fresh_owners(self, b: Staged) -> set[int]:
        """The owners of the batch's links known to have no row before its upsert, hence no
        links and nothing for the guard to refuse (`FreshIds`: not asked of the server; in a
        first backfill, all)."""
        if not b.links or not b.ids:
            return set()
        return self.fresh.absent(b.type, {rid for pairs in b.links.values() for rid, _ in pairs})

    def _stamps(self, b: Staged) -> dict[int, Any] | None:
        """Each row's `updated_at` as the batch has it, when batch and table have the column:
        the links of a copy the guard refused are not written (`linkwrite.write`)."""
        if not b.links or UPDATED_AT not in b.columns or UPDATED_AT not in self.columns(b.type):
            return None
        pos = b.columns.index(UPDATED_AT) + 1
        return {row[0]: row[pos] for row in b.rows}

    def feed_notes(self) -> changes.LinkNotes | None:
        """Where a batch's link changes are entered in the change feed: nowhere in a bulk load
        or a schema without the feed (asked of the catalogue until it is there)."""
        if self.bulk or not self.columns(changes.FEED):
            return None
        return changes.LinkNotes(self.conn, self.schema)
