"""The page write into PostgreSQL: a staged batch merged into its table by one guarded `INSERT
... ON CONFLICT`, its rows bound as one binary array per column; one transaction per page, or a
group of pages to one when a bulk load says so (`PageGroup`).

Issue #49, item 2, and the first part of the PostgreSQL mirror: not wired into `Mirror` yet (no
tombstones here; the change feed's triggers are the store's to make, `sync.store.pg.changes`).
The rows arrive staged exactly as for SQLite (`sync.pipeline.batches.Staged`); this module binds
them and never stages them itself.

**A page** (`ensure_page`, then `write_page`): every batch's rows and the links of the rows the
guard lets through (`link_guard`, SQLite's rule: an older copy changes neither a row nor its
links), then the listing mall's memberships of the listed type's rows, in one transaction;
links and memberships are written only where they differ (`sync.store.pg.links`,
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
(`upsert_sql`), each column's values one parameter, a one-dimensional array of the column's
type (`Array`). Keys are taken in id order, so two writers never deadlock. On an idle
connection in autocommit the statement is its own transaction, one round trip with its commit;
inside a caller's page transaction it is a part of it, with no savepoint (one statement cannot
half-apply; its failure fails the page). Its count is of rows inserted or updated; a row the
guard refuses is locked, never rewritten (its `xmin` stays). The ways tried, over the pages
`bench/pg_write.py` writes (deals, 50,000 rows in pages of 100, one transaction each; CPU
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

A page costs the server about twice what a bare COPY of its rows does: the merge's index
probe, speculative insert and its confirmation for each row (three WAL records), where COPY only
inserts. Client-side, the statement is rendered once per table and column set (psycopg would compose a
`sql.Composed` again on every execute) and prepared by psycopg after a few uses; a page's text
columns are checked at C speed and bound as staged when every value is a string without NUL
(`plain_texts`), converted one value at a time otherwise.

**Group commit** (`PageGroup`), when the caller says so (a backfill; the daemon keeps one
transaction per page, since a webhook's 202 must follow a real commit): several pages to one
transaction, as the SQLite backfill's `sync.store.groupcommit`, committed every `pages` pages
or `seconds`, the whole group rolled back on a failure. Its statements go in pipeline mode:
the server merges one page while the client encodes the next, and the client waits only when
the group commits, not per page. A group of 20 or 256 pages writes 1.6x to 2.7x the rows a
second of one page per transaction (one round trip and one commit each), the more as the client
and the server each find a core of their own (`docs/benchmarks.md`).

**Schema.** `ensure` creates the schema and table (`id bigint PRIMARY KEY` and the batch's
columns) and adds columns (`ADD COLUMN IF NOT EXISTS`) in a transaction of its own before the
page's, as the SQLite store changes its schema first. Types come from the spec's declarations
(`sync.model.columns`): integers `bigint`, booleans `boolean` (staged as 0/1), numbers `double
precision` (SQLite's REAL, so values compare as in the SQLite mirror; `numeric` would read
10.2 back as a Decimal), strings and decimals-as-strings `text`, the spec's object and array
attributes (`JSON_ATTRIBUTES`) `jsonb`. Date fields stay `text`, `COLLATE "C"`: the absolute
stamps are normalised on staging to `YYYY-MM-DDTHH:MM:SS.sssZ` (`sync.model.stamps`), so byte
order is time order and the guard compares them exactly as SQLite's does (relative ones are kept
as served, as in SQLite); `timestamptz` can come later, with a conversion on both sides. An
attribute the spec does not list is inferred from the batch's values (`bigint`, then `double
precision`, then `text`; objects and arrays arrive as JSON text, as in SQLite) and widened the
same way when a later value does not fit (`ALTER COLUMN ... TYPE`: the table is rewritten under
an exclusive lock, as SQLite's `transform` rebuilds it); one whose values are all null is not created until one
is not. An attribute named as a system column (`xmin`) or longer than 63 bytes is not stored
(`usable`). A text value with a NUL character (PostgreSQL text cannot hold one; SQLite can) is
stored with U+FFFD in its place, and so is one inside a jsonb value.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from types import TracebackType
from typing import Any, ClassVar

import orjson
import psycopg
from psycopg import abc, pq, sql
from psycopg.adapt import Dumper, Transformer
from psycopg.types.json import Jsonb

try:  # psycopg >= 3.2; the C implementation when psycopg[binary] is installed
    from psycopg._copy_base import format_row_binary
except ImportError:  # pragma: no cover - psycopg 3.1
    from psycopg.copy import format_row_binary  # type: ignore[attr-defined,no-redef]

from sync.model import catalogue
from sync.model.columns import COLUMN_TYPES, KEY_COLUMNS, VALUE_KINDS
from sync.model.stamps import ABSOLUTE
from sync.pipeline.batches import Staged
from sync.pipeline.encoding import dumps
from sync.store.pg import changes, links, memberships
from sync.store.pg.links import Links

BIGINT = "bigint"
DOUBLE = "double precision"
TEXT = "text"
BOOLEAN = "boolean"
JSONB = "jsonb"
#: A date field: text compared byte by byte, as SQLite compares it.
STAMP = 'text COLLATE "C"'
#: Inferred types in widening order: a column only ever moves right.
WIDER = (BIGINT, DOUBLE, TEXT)
#: How a column is changed to a wider inferred type.
WIDEN_USING = {DOUBLE: "double precision", TEXT: "text"}

#: The attributes the spec types object or array. `sync.model.columns` declares them TEXT (the
#: SQLite mirror keeps them as JSON text); here they are `jsonb`, queryable as JSON.
JSON_ATTRIBUTES: dict[str, frozenset[str]] = {
    "stores": frozenset({"structured_hours"}),
    "programs": frozenset({"properties"}),
    "social_feeds": frozenset({"properties"}),
}

#: Names PostgreSQL keeps for its system columns: an attribute so named cannot be a column.
SYSTEM_COLUMNS = frozenset({"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid", "oid"})
#: PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1): a longer one is truncated, so
#: two long attribute names could meet in one column.
MAX_NAME = 63

#: The stamp the guard compares.
UPDATED_AT = "updated_at"
#: PostgreSQL type oids the writer converts values for (others are bound as staged).
TEXT_OID = 25
JSONB_OID = 3802


def declared(table: str, column: str) -> str | None:
    """The PostgreSQL type of `column` of `table` from the spec's declarations, or None for an
    attribute the spec does not list (inferred from its values: `inferred`)."""
    affinity = COLUMN_TYPES.get(table, KEY_COLUMNS).get(column)
    if affinity is None:
        return None
    if affinity == "INTEGER":
        return BOOLEAN if VALUE_KINDS.get(table, {}).get(column) == "boolean" else BIGINT
    if affinity == "REAL":
        return DOUBLE
    if column in JSON_ATTRIBUTES.get(table, ()):
        return JSONB
    rtype = catalogue.TYPES.get(table)
    if column in ABSOLUTE or (rtype is not None and column in rtype.date_fields):
        return STAMP
    return TEXT


def usable(column: str) -> bool:
    """Whether an attribute can be a column here: not a system column's name, nor longer than
    PostgreSQL keeps. Like the names staging leaves out (`sync.pipeline.staging.safe_name`), an
    attribute that cannot be one is not stored, and the rest of its row is."""
    return column not in SYSTEM_COLUMNS and len(column.encode()) <= MAX_NAME


def inferred(values: Iterable[Any]) -> str | None:
    """The narrowest of `WIDER` that holds every value as staged, None when all are null."""
    widest = -1
    for v in values:
        if v is None:
            continue
        kind = type(v)
        rank = 0 if kind is int or kind is bool else 1 if kind is float else 2
        if rank > widest:
            widest = rank
            if rank == 2:
                break
    return WIDER[widest] if widest >= 0 else None


@dataclass(frozen=True)
class Column:
    """A column as the server has it: its type's oid (the elements of the array bound for it),
    its name, and the oid of the array of that type (the parameter's type)."""

    oid: int
    type: str
    array_oid: int = 0


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


@dataclass(frozen=True)
class Binding:
    """How a batch of one table and column set is bound (`PageWriter.statement`)."""

    #: The guarded upsert, as sent (psycopg would compose a `sql.Composed` again each time).
    statement: bytes
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


#: The head of a one-dimensional binary array: dimensions, has nulls, element type, length,
#: lower bound; the elements follow, each its length (-1 for null) and bytes, as a binary COPY
#: row's fields are (which `format_row_binary` writes after its field count).
ARRAY_HEAD = struct.Struct("!iiiii")
#: The field count a binary COPY row starts with, dropped from an array's elements.
FIELD_COUNT = 2
#: The types of a text column's values written as they are (no NUL in any string).
PLAIN_TEXT = frozenset({str, type(None)})


def _as_is(text: Any) -> Any:
    """The `dumps` of a jsonb value already serialised."""
    return text


def _no_nul(value: Any) -> Any:
    """`value` (parsed JSON) with every NUL character of its strings, keys too, as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nul(v) for v in value]
    return value


def _json_text(text: str) -> bool:
    """Whether `text` is the JSON text of an object or array (as staging encodes them)."""
    if text[:1] not in ("{", "["):
        return False
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # an integer beyond 64 bits: orjson refuses it, the standard library reads it
            parsed = json.loads(text)
        except ValueError:
            return False
    return isinstance(parsed, dict | list)


def to_text(value: Any) -> str:
    """A staged value for a text column: a number as its text (as SQLite's TEXT affinity
    stores it), NUL as U+FFFD."""
    if type(value) is not str:
        return str(value)
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def to_jsonb(value: Any) -> Jsonb:
    """A staged value for a jsonb column. Staging encodes objects and arrays as JSON text, which
    is passed on as it is; any other value (a string, a number) is stored as a JSON scalar. A
    string that is itself valid JSON text of an object or array cannot be told from one, and is
    stored as that object or array."""
    text = value if type(value) is str and _json_text(value) else dumps(value).decode()
    if "\\u0000" in text:  # jsonb refuses NUL in its strings
        text = json.dumps(_no_nul(json.loads(text)), ensure_ascii=False, separators=(",", ":"))
    return Jsonb(text, dumps=_as_is)


def json_value(text: str) -> Jsonb:
    """JSON text (of any value, as `orjson.dumps` writes it) for a jsonb column, as it is: what
    the SQLite mirror keeps as JSON text outside the typed columns (a press release's
    attachments, a mall's current hours: `sync.store.pg.press`, `sync.store.pg.hours`), where
    `to_jsonb` takes a staged value (`null` here is the JSON null, `"s"` the string s). NUL in
    its strings becomes U+FFFD, as in `to_jsonb`."""
    if "\\u0000" in text:  # jsonb refuses NUL in its strings
        text = json.dumps(_no_nul(json.loads(text)), ensure_ascii=False, separators=(",", ":"))
    return Jsonb(text, dumps=_as_is)


#: The value conversions per column type oid; a type not named binds values as staged.
CONVERT: dict[int, Callable[[Any], Any]] = {TEXT_OID: to_text, JSONB_OID: to_jsonb}


def plain_texts(values: Iterable[Any]) -> bool:
    """Whether every value is a string without NUL, or null: text columns' values to bind as
    they are, no `to_text` call each (checked at C speed: a page's text columns at once)."""
    flat = list(values)
    return set(map(type, flat)) <= PLAIN_TEXT and "\x00" not in "".join(filter(None, flat))


def latest_copies(rows: Sequence[tuple[Any, ...]], stamp: int | None) -> list[tuple[Any, ...]]:
    """The rows in id order, one per id: of several copies, the one SQLite's row-by-row guarded
    upsert would leave (a later copy replaces an earlier one unless it is older; a missing stamp
    loses to a present one). `stamp` is the position of `updated_at` in a row, or None."""
    if len({r[0] for r in rows}) == len(rows):
        return sorted(rows, key=itemgetter(0))
    kept: dict[int, tuple[Any, ...]] = {}
    for row in rows:
        held = kept.get(row[0])
        if (
            held is None
            or stamp is None
            or held[stamp] is None
            or (row[stamp] is not None and row[stamp] >= held[stamp])
        ):
            kept[row[0]] = row
    return sorted(kept.values(), key=itemgetter(0))


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
        self._sql: dict[tuple[str, tuple[str, ...]], sql.Composed] = {}
        #: Per table and batch columns: how such a batch is bound (`_binding`).
        self._bindings: dict[tuple[str, tuple[str, ...]], Binding] = {}
        #: Per (element type, length): a transformer dumping that many values of the type.
        self._dumpers: dict[tuple[int, int], abc.Transformer] = {}
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
                    self.conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        ),
                        prepare=False,
                    )
                    self.conn.execute(
                        sql.SQL("CREATE TABLE IF NOT EXISTS {} (id bigint PRIMARY KEY)").format(
                            target
                        ),
                        prepare=False,
                    )
                if add:
                    self.conn.execute(
                        sql.SQL("ALTER TABLE {} {}").format(
                            target,
                            sql.SQL(", ").join(
                                sql.SQL("ADD COLUMN IF NOT EXISTS {} {}").format(
                                    sql.Identifier(c), sql.SQL(t)
                                )
                                for c, t in add
                            ),
                        ),
                        prepare=False,
                    )
                for col, typ in widen:
                    self.conn.execute(
                        sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}::{}").format(
                            target,
                            sql.Identifier(col),
                            sql.SQL(typ),
                            sql.Identifier(col),
                            sql.SQL(WIDEN_USING[typ]),
                        ),
                        prepare=False,
                    )
        finally:
            self.forget(table)

    def upsert(self, b: Staged) -> int:
        """Merge the batch into its table under the guard, in one statement: how many rows were
        inserted or updated. On an idle connection in autocommit the statement is its own
        transaction (one round trip); inside a caller's transaction it is a part of it (a
        failure fails the caller's transaction, the page). The table must exist (`ensure`); a
        batch column it lacks (all null when ensured, or not `usable`) is left out."""
        page = self.statement(b)
        if page is None:
            return 0
        statement, params = page
        conn = self.conn
        if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            # In a pipeline (a page of a `PageGroup`): the count once the server has answered.
            with conn.pipeline():
                cur = conn.execute(statement, params)
            return cur.rowcount
        if conn.autocommit or conn.info.transaction_status != pq.TransactionStatus.IDLE:
            return conn.execute(statement, params).rowcount
        with conn.transaction():
            return conn.execute(statement, params).rowcount

    def send(self, b: Staged) -> psycopg.Cursor[Any] | None:
        """`upsert`'s statement executed on a new cursor, which is returned unread (None for an
        empty batch): in pipeline mode (`PageGroup`) the statement is sent and the next page
        encoded while the server runs it; its `rowcount` is known once the pipeline syncs."""
        page = self.statement(b)
        if page is None:
            return None
        cur = self.conn.cursor()
        cur.execute(*page)
        return cur

    def statement(self, b: Staged) -> tuple[bytes, list[Array]] | None:
        """The batch's guarded upsert (`upsert_sql`) and its parameters, one binary array per
        column (None for an empty batch): the rows reduced to one copy per id in id order
        (`latest_copies`) and converted as their columns take them (`CONVERT`)."""
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
        return bound.statement, [
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
            statement=self.upsert_sql(b.type, cols).as_bytes(self.conn),
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

    def upsert_sql(self, table: str, cols: tuple[str, ...]) -> sql.Composed:
        """`INSERT INTO t SELECT ... FROM (SELECT unnest(%s) AS id, ...) AS s ORDER BY id ON
        CONFLICT (id) DO UPDATE SET ... WHERE <guard>` for one column set (built once), its
        parameters one array per column (`statement`): see the module's docstring."""
        key = (table, cols)
        found = self._sql.get(key)
        if found is not None:
            return found
        t = sql.Identifier("t")
        names = sql.SQL(", ").join(sql.Identifier(c) for c in ("id", *cols))
        # One array per column, unnested side by side in the select list (a set-returning
        # function there is evaluated a row at a time; in FROM, each would be materialised).
        arrays = sql.SQL(", ").join(
            sql.SQL("unnest(%s) AS {}").format(sql.Identifier(c)) for c in ("id", *cols)
        )
        # A mall-scoped row's `mall_id` is the lowest mall that lists it (`sync.store.memberships`);
        # elsewhere (events) it is a to-one relationship, replaced like any column.
        scoped = table in memberships.MEMBER_TYPES

        def new(c: str) -> sql.Composable:
            excluded = sql.SQL("EXCLUDED.{}").format(sql.Identifier(c))
            if c == "mall_id" and scoped:
                return sql.SQL("LEAST({}.{}, {})").format(t, sql.Identifier(c), excluded)
            return excluded

        head = sql.SQL(
            "INSERT INTO {} AS {} ({}) SELECT {} FROM (SELECT {}) AS s ORDER BY id"
        ).format(sql.Identifier(self.schema, table), t, names, names, arrays)
        if not cols:
            found = sql.SQL("{} ON CONFLICT (id) DO NOTHING").format(head)
        else:
            sets = sql.SQL(", ").join(
                sql.SQL("{} = {}").format(sql.Identifier(c), new(c)) for c in cols
            )
            changed = sql.SQL("ROW({}) IS DISTINCT FROM ROW({})").format(
                sql.SQL(", ").join(sql.SQL("{}.{}").format(t, sql.Identifier(c)) for c in cols),
                sql.SQL(", ").join(new(c) for c in cols),
            )
            if UPDATED_AT in cols:
                at = sql.Identifier(UPDATED_AT)
                guard = sql.SQL(
                    "EXCLUDED.{at} > {t}.{at} OR (({t}.{at} IS NULL OR EXCLUDED.{at} = {t}.{at})"
                    " AND {changed})"
                ).format(at=at, t=t, changed=changed)
            else:
                guard = changed
            found = sql.SQL("{} ON CONFLICT (id) DO UPDATE SET {} WHERE {}").format(
                head, sets, guard
            )
        self._sql[key] = found
        return found

    def ensure_page(self, batches: Sequence[Staged]) -> None:
        """`ensure` each batch, the link tables its linkage names, and the membership table of
        a mall's listing of a mall-scoped type: before the page's transaction, as `ensure`."""
        for b in batches:
            self.ensure(b)
            names = self._missing_link_tables(b)
            if names:
                links.ensure(self.conn, self.schema, b.rtype, names)
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
        """`write_page`'s writes in the transaction the connection holds (a `PageGroup`'s: no
        savepoint per page): the rows inserted or updated."""
        written = 0
        for b in batches:
            own = self.link_guard(b)
            notes = self.feed_notes() if own else None  # before the upsert, as SQLite
            written += self.upsert(b)
            links.write(self.conn, self.schema, b.rtype, own, notes=notes)
        if batches:
            self.write_memberships(batches[0])
        return written

    def write_memberships(self, b: Staged) -> None:
        """The mall that listed a page's rows lists them: one (mall, row) pair each."""
        if b.rtype.level != "mall" or not b.ids or "mall_id" not in b.columns:
            return
        pos = b.columns.index("mall_id") + 1
        pairs = [(row[pos], row[0]) for row in b.rows if row[pos] is not None]
        memberships.add(self.conn, self.schema, b.type, pairs)

    def link_guard(self, b: Staged) -> Links:
        """The batch's links less those of rows the upsert's guard will refuse (an older copy,
        or one without a stamp over a stored one), where batch and table have `updated_at`."""
        if not b.links or UPDATED_AT not in b.columns or UPDATED_AT not in self.columns(b.type):
            return b.links
        return links.guarded(self.conn, self.schema, b)

    def feed_notes(self) -> changes.LinkNotes | None:
        """Where a batch's link changes are entered in the change feed: nowhere in a bulk load
        or a schema without the feed (asked of the catalogue until it is there)."""
        if self.bulk or not self.columns(changes.FEED):
            return None
        return changes.LinkNotes(self.conn, self.schema)


class PageGroup:
    """Several pages to a transaction, when the caller says so (a backfill): the PostgreSQL side
    of the SQLite mirror's group commit (`sync.store.groupcommit`); one transaction per page
    (`PageWriter.write`, `PageWriter.write_page`) stays the default.

    Used as a context manager over one `PageWriter`, on an idle connection in autocommit. The
    open group is a transaction in pipeline mode, committed once `pages` pages are in it or it
    is `seconds` old (so readers see a bulk load progress), and at the end of the block:
    `write` sends a batch's guarded upsert (`PageWriter.send`, the statement a batch written
    alone runs) without waiting for it, so the client encodes the next page while the server
    merges this one; `write_page` writes a whole page as `PageWriter.write_page` does (rows,
    links, memberships: `page_writes`), waiting only where it reads (the links' guard and held
    lists), with no savepoint per page (a transaction with more than 64 subtransactions slows
    every reader's snapshots). A schema change (`changes_schema`, `page_changes_schema`)
    commits the open group first and is made in a transaction of its own, as a page written
    alone makes it. A failure, in a page's statements or in the block, rolls the open group
    back as a whole and is raised (at the latest when the group syncs): as SQLite's group, a
    group commits or rolls back with every page in it, so pages and their checkpoints go
    together, and a crash or an error loses at most the open group, which a backfill fetches
    again. Statements the caller runs on the connection between writes are a part of the open
    group.

    The guard is the page's own, statement by statement. The keys of each page are taken in id
    order, those of a group page after page: a second writer of the same rows could deadlock
    with a group (PostgreSQL would roll one back), which the active lock (`sync.store.pg.lock`)
    rules out. `written` counts the rows inserted or updated by the committed groups.
    """

    def __init__(self, writer: PageWriter, pages: int, seconds: float = 2.0) -> None:
        if pages < 1:
            raise ValueError(f"a group holds at least one page, not {pages}")
        self.writer = writer
        self.conn = writer.conn
        self.size = pages
        self.seconds = seconds
        #: Rows inserted or updated by the groups committed so far, and their number.
        self.written = 0
        self.commits = 0
        self._open: contextlib.ExitStack | None = None
        self._sent: list[psycopg.Cursor[Any]] = []  # upserts sent, their counts not read yet
        self._counted = 0  # rows the open group's whole pages wrote
        self._pages = 0
        self._began = 0.0

    def __enter__(self) -> PageGroup:
        if (
            not self.conn.autocommit
            or self.conn.info.transaction_status != pq.TransactionStatus.IDLE
        ):
            raise RuntimeError(
                "a PostgreSQL page group needs a connection in autocommit, outside a transaction"
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.commit()
        else:
            self._rollback(exc_type, exc, tb)

    def write(self, b: Staged) -> None:
        """A batch's rows into the open group (opening one) as a page of their own: its schema
        ensured first, then its upsert sent; the group committed when full or old enough."""
        if self.writer.changes_schema(b):
            self.commit()
            self.writer.ensure(b)

        def send() -> None:
            cur = self.writer.send(b)
            if cur is not None:
                self._sent.append(cur)

        self._page(send)

    def write_page(self, batches: Sequence[Staged]) -> None:
        """A whole page (`PageWriter.write_page`'s writes) into the open group (opening one):
        its schema ensured first; the group committed when full or old enough."""
        if self.writer.page_changes_schema(batches):
            self.commit()
            self.writer.ensure_page(batches)

        def writes() -> None:
            self._counted += self.writer.page_writes(batches)

        self._page(writes)

    def _page(self, writes: Callable[[], None]) -> None:
        """A page's `writes` in the open group, opened first when none is."""
        if self._open is None:
            group = contextlib.ExitStack()
            try:
                group.enter_context(self.conn.pipeline())
                group.enter_context(self.conn.transaction())
            except BaseException:
                group.close()
                raise
            self._open = group
            self._began = time.monotonic()
        try:
            writes()
        except BaseException as exc:
            self._rollback(type(exc), exc, exc.__traceback__)
            raise
        self._pages += 1
        if self._pages >= self.size or time.monotonic() - self._began >= self.seconds:
            self.commit()

    def commit(self) -> None:
        """Commit the open group, if any (waiting for the server), and count its rows."""
        group, self._open = self._open, None
        if group is None:
            return
        try:
            group.close()  # COMMIT; the pipeline synced and left
        finally:
            sent, counted = self._sent, self._counted
            self._sent, self._counted, self._pages = [], 0, 0
        self.written += counted + sum(cur.rowcount for cur in sent)
        self.commits += 1

    def _rollback(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Roll the open group back (its transaction left with the error)."""
        group, self._open = self._open, None
        self._sent, self._counted, self._pages = [], 0, 0
        if group is not None:
            group.__exit__(exc_type, exc, tb)
