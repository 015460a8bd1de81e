"""The page write into PostgreSQL: a staged batch COPYed into a temporary table, then merged into
its table by one guarded `INSERT ... ON CONFLICT`, in one transaction.

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

**The write.** Binary `COPY` into a temporary table (`ON COMMIT DROP`, and dropped at once so
several batches may share one page transaction), then `INSERT INTO t SELECT ... ORDER BY id ON
CONFLICT (id) DO UPDATE ... WHERE <guard>`: keys are taken in id order, so two writers never
deadlock. `upsert` runs in `conn.transaction()`: its own transaction on an idle connection, a
savepoint inside a caller's page transaction. Its count is of rows inserted or updated; a row
the guard refuses is locked, never rewritten (its `xmin` stays).

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

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

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
    """A column as the server has it: its type's oid (what binary COPY sends) and name."""

    oid: int
    type: str


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

    def columns(self, table: str) -> dict[str, Column]:
        """The columns of `table` in this schema, by name (empty when it does not exist)."""
        found = self._columns.get(table)
        if found is None:
            rows = self.conn.execute(
                "SELECT a.attname, a.atttypid::int, format_type(a.atttypid, a.atttypmod)"
                " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')"
                " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                (self.schema, table),
            ).fetchall()
            found = {name: Column(oid, typ) for name, oid, typ in rows}
            if found:
                self._columns[table] = found
        return found

    def forget(self, table: str) -> None:
        """Drop the cached columns of `table` (after a change made outside this writer)."""
        self._columns.pop(table, None)

    def write(self, b: Staged) -> int:
        """`ensure` the batch's table and columns, then `upsert` its rows: how many were
        inserted or updated."""
        self.ensure(b)
        return self.upsert(b)

    def ensure(self, b: Staged) -> None:
        """Create the batch's table, add the columns it lacks and widen inferred ones a value
        does not fit, in one transaction of its own: call it outside the page's transaction."""
        if not b.ids:
            return
        table = b.type
        have = self.columns(table)
        add: list[tuple[str, str]] = []
        widen: list[tuple[str, str]] = []
        for pos, col in enumerate(b.columns, start=1):
            if not usable(col):
                continue
            want = declared(table, col)
            current = have.get(col)
            if current is None:
                typ = want or inferred(row[pos] for row in b.rows)
                if typ is not None:  # all null: made once a value comes
                    add.append((col, typ))
            elif want is None and current.type in WIDER[:-1]:
                need = inferred(row[pos] for row in b.rows)
                if need is not None and WIDER.index(need) > WIDER.index(current.type):
                    widen.append((col, need))
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
        """COPY the batch into a temporary table and merge it into its table under the guard,
        in `conn.transaction()`; how many rows were inserted or updated. The table must exist
        (`ensure`); a batch column it lacks (all null when ensured, or not `usable`) is left
        out."""
        if not b.ids:
            return 0
        table = b.type
        have = self.columns(table)
        if not have:
            raise RuntimeError(f"{self.schema}.{table}: no such table (ensure the batch first)")
        cols = tuple(c for c in b.columns if c in have)
        take = (0, *(b.columns.index(c) + 1 for c in cols))
        stamp = cols.index(UPDATED_AT) + 1 if UPDATED_AT in cols else None
        picked = (
            list(b.rows)
            if len(cols) == len(b.columns)
            else [tuple(row[p] for p in take) for row in b.rows]
        )
        rows = latest_copies(picked, stamp)
        convert = [(i, f) for i, c in enumerate(cols, 1) if (f := CONVERT.get(have[c].oid))]
        stage = sql.Identifier(f"_ccsync_stage_{table}")
        names = sql.SQL(", ").join(sql.Identifier(c) for c in ("id", *cols))
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA"
                ).format(stage, names, sql.Identifier(self.schema, table)),
                prepare=False,
            )
            with cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(stage, names)
            ) as copy:
                copy.set_types([have["id"].oid, *(have[c].oid for c in cols)])
                for row in rows:
                    if convert:
                        values = list(row)
                        for i, f in convert:
                            if values[i] is not None:
                                values[i] = f(values[i])
                        copy.write_row(values)
                    else:
                        copy.write_row(row)
            cur.execute(self.upsert_sql(table, cols))
            written = cur.rowcount
            cur.execute(sql.SQL("DROP TABLE {}").format(stage), prepare=False)
        return written

    def upsert_sql(self, table: str, cols: tuple[str, ...]) -> sql.Composed:
        """`INSERT INTO t SELECT ... FROM <stage> ORDER BY id ON CONFLICT (id) DO UPDATE SET
        ... WHERE <guard>` for one column set (built once): see the module's docstring."""
        key = (table, cols)
        found = self._sql.get(key)
        if found is not None:
            return found
        t = sql.Identifier("t")
        stage = sql.Identifier(f"_ccsync_stage_{table}")
        names = sql.SQL(", ").join(sql.Identifier(c) for c in ("id", *cols))
        # A mall-scoped row's `mall_id` is the lowest mall that lists it (`sync.store.memberships`);
        # elsewhere (events) it is a to-one relationship, replaced like any column.
        scoped = table in memberships.MEMBER_TYPES

        def new(c: str) -> sql.Composable:
            excluded = sql.SQL("EXCLUDED.{}").format(sql.Identifier(c))
            if c == "mall_id" and scoped:
                return sql.SQL("LEAST({}.{}, {})").format(t, sql.Identifier(c), excluded)
            return excluded

        head = sql.SQL("INSERT INTO {} AS {} ({}) SELECT {} FROM {} ORDER BY id").format(
            sql.Identifier(self.schema, table), t, names, names, stage
        )
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
            names = [
                lt.relationship.name
                for lt in b.rtype.link_tables
                if lt.relationship.name in b.links and not self.columns(lt.table)
            ]
            if names:
                links.ensure(self.conn, self.schema, b.rtype, names)
        main = batches[0] if batches else None
        if (
            main is not None
            and main.rtype.level == "mall"
            and "mall_id" in main.columns
            and not self.columns(memberships.table(main.type))
        ):
            memberships.ensure(self.conn, self.schema, main.type, bulk=self.bulk)

    def write_page(self, batches: Sequence[Staged]) -> int:
        """A page in one transaction (a savepoint inside a caller's): each batch's rows under
        the guard and the links of those it lets through, in the page's order (the listed type
        first, as SQLite), then the listing mall's memberships. `ensure_page` first. Returns
        the rows inserted or updated."""
        written = 0
        with self.conn.transaction():
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
