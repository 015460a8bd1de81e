"""The change feed in PostgreSQL: `_sync_changes`, the triggers that fill it, one `NOTIFY` per
committed batch, and its reads and pruning.

Issue #49, the PostgreSQL side of `sync.store.changes` (read that module first: this one keeps
its table, its entries and its reads, and says here only where and why it differs). Not wired
into `Mirror` yet: the store around it calls `ensure` once, `create_triggers` for each content
table it makes or widens (after `PageWriter.ensure`), and reads through `ChangeFeed`.

**The table** has SQLite's columns: `seq` (`bigint GENERATED ALWAYS AS IDENTITY`: like
AUTOINCREMENT, never a number again after a delete or a prune), `type`, `id`, `op`,
`updated_at` and `at` (text, `COLLATE "C"`, in the `YYYY-MM-DDTHH:MM:SS.sssZ` form the SQLite
triggers write: byte order is time order, as for the page write's stamps). `at` is the
server's clock (`clock_timestamp()`), and so is `prune`'s cutoff: the writer and the server
may run on two hosts whose clocks disagree. The last sequence number pruned is kept in
`_sync_meta` (`changes_pruned_through`), one of the bookkeeping tables `ensure` makes.

**Content triggers** are row-level, one PL/pgSQL function per table (`_sync_changes_<table>`)
behind three triggers (insert, update, delete), so entries come one per row in the order the
statement wrote the rows (the page write's id order), and under SQLite's rules: an insert is an
`upsert`; an update to another `updated_at` is an `upsert`; under the same stamp, other content
is a `repair`, and a change of linkage alone (`link_columns`) a `links` entry unless the
newest entry already says so for that row; a table without `updated_at` logs any update whose
columns differ; a delete is a `delete`. The update trigger fires only `WHEN (OLD.* IS DISTINCT
FROM NEW.*)`, and a row the page write's guard refused is never updated, so neither adds
anything. The function names its table's columns, so `create_triggers` replaces it when a
column was added (as SQLite's triggers are made anew).

**Membership triggers** (`malls_<type>`) are statement-level over transition tables: a
statement that gives a row a second mall, or takes one of its malls while it stays, adds one
`links` entry per row (SQLite's row triggers, which run as each pair is written, come to the
same; PostgreSQL's row triggers run at the statement's end, when every pair is in, and would
log a row once per pair).

**One writer at a time, in commit order.** Readers follow the feed by `seq`, which only works
if no entry becomes visible below one a reader has already passed. SQLite guarantees it with
its one write lock; in PostgreSQL a sequence number is taken at insert and becomes visible at
commit, so two transactions appending at once could commit out of order. A statement trigger
on the feed takes a transaction-level advisory lock (`FEED_LOCK`, the feed table's oid) before
any number is drawn, held to commit: appenders queue, and numbers are visible in order. The
mirror has one writer (the active daemon), so the lock is uncontended; two writers that touch
the same rows could deadlock over it, and PostgreSQL would abort one (its page rolls back and
is retried). Numbers may have gaps (a rolled-back transaction's are not reused, as SQLite's
are): readers ask for entries after the last `seq` they saw, never for `seq + 1`.

**Wake-ups.** A statement trigger on the feed calls `pg_notify('<schema>_changes', '')` when
the statement appended an entry. PostgreSQL folds identical notifications of one transaction
(savepoints included) into one and delivers it at commit, and none for a transaction rolled
back: one wake-up per committed batch, whatever its size, and none for a page the guard
refused entirely. The payload is empty and a notification may be lost (a listener that was
not connected) or be one of several folded: it says only "read the feed now". A reader
`listen`s, then reads `ChangeFeed.since(last_seq_it_saw)` until empty, and again on every
notification (and now and then without one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from sync.model import catalogue
from sync.store import memberships
from sync.store.changes import PRUNED_KEY, Change, link_columns
from sync.store.pg.bookkeeping import KEY, ensure_bookkeeping, exists

#: PostgreSQL's longest identifier in bytes, and a stamp's type (text compared byte by byte):
#: the page write's `MAX_NAME` and `STAMP`, not imported from it, since the page write imports
#: the links, which note their changes here (`LinkNotes`).
MAX_NAME = 63
STAMP = KEY

FEED = "_sync_changes"
META = "_sync_meta"
#: The prefix of the content and membership triggers and functions (`drop_triggers`).
PREFIX = "_sync_changes_"
#: The feed's own functions and triggers (the lock and the wake-up), on `_sync_changes`.
LOCK = "_sync_feed_lock"
NOTIFY = "_sync_feed_notify"
#: The first key of the feed's advisory lock (the second is the feed table's oid): a constant
#: of this program's own (`ccsc`), apart from the single-key locks other programs use.
FEED_LOCK = 0x63637363
#: The triggers' clock, in the form of `sync.model.stamps.iso_ms` (SQLite's `strftime`).
NOW = "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

_TABLE_SQL = (
    "CREATE TABLE IF NOT EXISTS {feed} (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " type text NOT NULL, id bigint, op text NOT NULL, updated_at {stamp}, at {stamp} NOT NULL)"
)


def channel(schema: str) -> str:
    """The notification channel of a schema's feed: `<schema>_changes`. PostgreSQL refuses a
    channel name longer than an identifier, so a schema name too long for one is refused."""
    name = f"{schema}_changes"
    if len(name.encode()) > MAX_NAME:
        raise ValueError(f"schema name {schema!r} too long for a change feed's channel {name!r}")
    return name


def listen(conn: psycopg.Connection[Any], schema: str) -> None:
    """`LISTEN` to the feed's channel on `conn` (in autocommit: a connection inside a
    transaction is handed its notifications only when the transaction ends)."""
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel(schema))))


def _name(*parts: str) -> str:
    """A trigger's or function's name; refused when PostgreSQL would truncate it (two long
    names could meet in one)."""
    name = "".join(parts)
    if len(name.encode()) > MAX_NAME:
        raise ValueError(f"{name!r}: longer than a PostgreSQL identifier")
    return name


def _text(conn: psycopg.Connection[Any], part: sql.Composable) -> str:
    """`part` as SQL text, quoted for `conn`: for the trigger functions' bodies, which are
    text the server keeps (and `_install_function` compares)."""
    return part.as_string(conn)


def _insert(conn: psycopg.Connection[Any], schema: str) -> str:
    """The head of every append: `INSERT INTO <schema>._sync_changes (...)`."""
    feed = _text(conn, sql.Identifier(schema, FEED))
    return f"INSERT INTO {feed} (type, id, op, updated_at, at)"


def _install_function(conn: psycopg.Connection[Any], schema: str, name: str, body: str) -> None:
    """Create the trigger function, or replace it where its body changed (a column added)."""
    row = conn.execute(
        "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %s AND p.proname = %s",
        (schema, name),
    ).fetchone()
    if row is not None and row[0] == body:
        return
    conn.execute(
        sql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS {}").format(
            sql.Identifier(schema, name), sql.Literal(body)
        ),
        prepare=False,
    )


def _trigger(schema: str, table: str, name: str, when: str, fn: str) -> sql.Composed:
    """`CREATE TRIGGER <name> <when, with ON {}> EXECUTE FUNCTION <schema>.<fn>()`."""
    return sql.SQL("CREATE TRIGGER {} ").format(sql.Identifier(name)) + sql.SQL(
        when + " EXECUTE FUNCTION {}()"
    ).format(sql.Identifier(schema, table), sql.Identifier(schema, fn))


def _install_triggers(
    conn: psycopg.Connection[Any], schema: str, table: str, triggers: dict[str, str], fn: str
) -> None:
    """Create each of `table`'s triggers that does not exist yet: name -> when it fires (its
    `ON {}` the table), each calling `fn`."""
    have = {
        r[0]
        for r in conn.execute(
            "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND NOT t.tgisinternal",
            (schema, table),
        )
    }
    for name, when in triggers.items():
        if name not in have:
            conn.execute(_trigger(schema, table, name, when, fn), prepare=False)


def ensure(conn: psycopg.Connection[Any], schema: str) -> None:
    """The schema and the bookkeeping tables (`sync.store.pg.bookkeeping`, `_sync_meta` among
    them), `_sync_changes`, and the feed's lock and wake-up triggers, when missing; in a
    transaction of their own (a savepoint inside the caller's), serialised with any other
    process ensuring the schema by the bookkeeping's lock."""
    with conn.transaction():
        ensure_bookkeeping(conn, schema)  # the schema and `_sync_meta`; its lock held to our end
        conn.execute(
            sql.SQL(_TABLE_SQL).format(feed=sql.Identifier(schema, FEED), stamp=sql.SQL(STAMP)),
            prepare=False,
        )
        lock = f"BEGIN PERFORM pg_advisory_xact_lock({FEED_LOCK}, TG_RELID::int); RETURN NULL; END"
        wake = (
            "BEGIN IF EXISTS (SELECT 1 FROM added) THEN PERFORM pg_notify("
            f"{_text(conn, sql.Literal(channel(schema)))}, ''); END IF; RETURN NULL; END"
        )
        _install_function(conn, schema, LOCK, lock)
        _install_function(conn, schema, NOTIFY, wake)
        _install_triggers(
            conn, schema, FEED, {LOCK: "BEFORE INSERT ON {} FOR EACH STATEMENT"}, LOCK
        )
        _install_triggers(
            conn,
            schema,
            FEED,
            {NOTIFY: "AFTER INSERT ON {} REFERENCING NEW TABLE AS added FOR EACH STATEMENT"},
            NOTIFY,
        )


def _differ(conn: psycopg.Connection[Any], columns: Iterable[str]) -> str:
    """`ROW(OLD.a, ...) IS DISTINCT FROM ROW(NEW.a, ...)` over `columns` (FALSE for none)."""
    cols = [_text(conn, sql.Identifier(c)) for c in sorted(columns)]
    if not cols:
        return "FALSE"
    old = ", ".join(f"OLD.{c}" for c in cols)
    new = ", ".join(f"NEW.{c}" for c in cols)
    return f"ROW({old}) IS DISTINCT FROM ROW({new})"


def _not_just_noted(conn: psycopg.Connection[Any], schema: str, type_name: str, rid: str) -> str:
    """The row's `links` entry is not the newest one already (SQLite's rule: one change of
    links often touches a row through several statements in a row)."""
    feed = _text(conn, sql.Identifier(schema, FEED))
    return (
        f"NOT EXISTS (SELECT 1 FROM {feed} WHERE seq = (SELECT max(seq) FROM {feed}) AND "
        f"type = {_text(conn, sql.Literal(type_name))} AND id = {rid} AND op = 'links')"
    )


def _content_body(conn: psycopg.Connection[Any], schema: str, table: str, columns: set[str]) -> str:
    """The PL/pgSQL body of one content table's trigger function (see the module's docstring)."""
    ins = f"{_insert(conn, schema)} VALUES ({_text(conn, sql.Literal(table))}, "
    if "updated_at" not in columns:
        own = _differ(conn, columns - {"id"})
        return (
            f"BEGIN IF TG_OP = 'INSERT' THEN {ins}NEW.id, 'upsert', NULL, {NOW}); "
            f"ELSIF TG_OP = 'DELETE' THEN {ins}OLD.id, 'delete', NULL, {NOW}); "
            f"ELSIF {own} THEN {ins}NEW.id, 'upsert', NULL, {NOW}); "
            "END IF; RETURN NULL; END"
        )
    linked = link_columns(table) & columns
    content = _differ(conn, columns - linked - {"id", "updated_at"})
    noted = _not_just_noted(conn, schema, table, "NEW.id")
    return (
        f"BEGIN IF TG_OP = 'INSERT' THEN {ins}NEW.id, 'upsert', NEW.updated_at, {NOW}); "
        f"ELSIF TG_OP = 'DELETE' THEN {ins}OLD.id, 'delete', OLD.updated_at, {NOW}); "
        "ELSIF OLD.updated_at IS DISTINCT FROM NEW.updated_at THEN "
        f"{ins}NEW.id, 'upsert', NEW.updated_at, {NOW}); "
        f"ELSIF {content} THEN {ins}NEW.id, 'repair', NEW.updated_at, {NOW}); "
        f"ELSIF ({_differ(conn, linked)}) AND {noted} THEN "
        f"{ins}NEW.id, 'links', NEW.updated_at, {NOW}); "
        "END IF; RETURN NULL; END"
    )


def _membership_body(conn: psycopg.Connection[Any], schema: str, type_name: str) -> str:
    """The PL/pgSQL body of a membership table's statement trigger function: a row that
    joined a mall while in another, or left one and still exists, changed its links."""
    pairs = _text(conn, sql.Identifier(schema, memberships.table(type_name)))
    rows = _text(conn, sql.Identifier(schema, type_name))
    row = _text(conn, sql.Identifier(memberships.columns(type_name)[1]))
    noted = _not_just_noted(conn, schema, type_name, "r.rid")
    head = (
        f"{_insert(conn, schema)} SELECT {_text(conn, sql.Literal(type_name))}, r.rid, "
        f"'links', NULL, {NOW} FROM (SELECT DISTINCT {row} AS rid FROM"
    )
    return (
        f"BEGIN IF TG_OP = 'INSERT' THEN {head} added) r WHERE (SELECT count(*) FROM {pairs} m "
        f"WHERE m.{row} = r.rid) > 1 AND {noted} ORDER BY r.rid; "
        f"ELSE {head} removed) r WHERE EXISTS (SELECT 1 FROM {rows} WHERE id = r.rid) "
        f"AND {noted} ORDER BY r.rid; END IF; RETURN NULL; END"
    )


def create_triggers(
    conn: psycopg.Connection[Any], schema: str, table: str, columns: set[str]
) -> None:
    """The feed's triggers of one content table (`columns`: its own, as the server has them)
    and, for a mall-scoped type, of its membership table when it exists; in a transaction of
    their own. Call it again after adding columns: the function is replaced to watch them."""
    if not columns:
        return
    fn = _name(PREFIX, table)
    triggers = {
        _name(fn, "_insert"): "AFTER INSERT ON {} FOR EACH ROW",
        _name(fn, "_update"): "AFTER UPDATE ON {} FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)",
        _name(fn, "_delete"): "AFTER DELETE ON {} FOR EACH ROW",
    }
    with conn.transaction():
        _install_function(conn, schema, fn, _content_body(conn, schema, table, columns))
        _install_triggers(conn, schema, table, triggers, fn)
        rtype = catalogue.TYPES.get(table)
        if (
            rtype is not None
            and rtype.level == "mall"
            and exists(conn, schema, memberships.table(table))
        ):
            create_membership_triggers(conn, schema, table)


def create_membership_triggers(conn: psycopg.Connection[Any], schema: str, type_name: str) -> None:
    """The membership table's statement triggers, once it is made."""
    table = memberships.table(type_name)
    fn = _name(PREFIX, table)
    triggers = {
        _name(fn, "_insert"): "AFTER INSERT ON {} REFERENCING NEW TABLE AS added "
        "FOR EACH STATEMENT",
        _name(fn, "_delete"): "AFTER DELETE ON {} REFERENCING OLD TABLE AS removed "
        "FOR EACH STATEMENT",
    }
    with conn.transaction():
        _install_function(conn, schema, fn, _membership_body(conn, schema, type_name))
        _install_triggers(conn, schema, table, triggers, fn)


def drop_triggers(conn: psycopg.Connection[Any], schema: str) -> None:
    """Drop every table's feed triggers (a bulk load into empty tables, which then notes one
    `backfill` entry per type); the feed's own lock and wake-up stay."""
    with conn.transaction():
        found = conn.execute(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s"
            " AND NOT t.tgisinternal AND t.tgname LIKE '\\_sync\\_changes\\_%%'",
            (schema,),
        ).fetchall()
        for table, name in found:
            conn.execute(
                sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                    sql.Identifier(name), sql.Identifier(schema, table)
                ),
                prepare=False,
            )


def note_backfill(conn: psycopg.Connection[Any], schema: str, types: Iterable[str]) -> None:
    """One `backfill` entry per type a bulk load filled: every row of it may have changed."""
    listed = list(types)
    if not listed:
        return
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (type, id, op, updated_at, at) SELECT t, NULL, 'backfill', NULL, "
            + NOW
            + " FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n"
        ).format(sql.Identifier(schema, FEED)),
        (listed,),
    )


class LinkNotes:
    """`links` entries for rows whose link lists changed, within one write (one transaction):
    made before the write, it leaves out the rows the write already entered and rows that do
    not exist (their links went with them), as `sync.store.changes.LinkNotes`."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str) -> None:
        self.conn = conn
        self.schema = schema
        self.mark = last_seq(conn, schema)

    def note(self, type_name: str, ids: Iterable[int]) -> None:
        """A `links` entry for each of `ids` that exists and was not entered since `mark`."""
        wanted = sorted(set(ids))
        if not wanted:
            return
        feed = sql.Identifier(self.schema, FEED)
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {feed} (type, id, op, updated_at, at) SELECT %(type)s, r.id, "
                f"'links', NULL, {NOW} FROM {{rows}} r WHERE r.id = ANY(%(ids)s) AND NOT EXISTS"
                " (SELECT 1 FROM {feed} c WHERE c.seq > %(mark)s AND c.type = %(type)s"
                " AND c.id = r.id) ORDER BY r.id"
            ).format(feed=feed, rows=sql.Identifier(self.schema, type_name)),
            {"type": type_name, "ids": wanted, "mark": self.mark},
        )


def last_seq(conn: psycopg.Connection[Any], schema: str) -> int:
    """The newest entry's sequence number (0 for an empty feed)."""
    row = conn.execute(
        sql.SQL("SELECT max(seq) FROM {}").format(sql.Identifier(schema, FEED))
    ).fetchone()
    return int(row[0] or 0) if row else 0


def read(
    conn: psycopg.Connection[Any],
    schema: str,
    since: int,
    limit: int,
    types: Sequence[str] = (),
    upto: int | None = None,
) -> list[Change]:
    """Entries after sequence number `since` (and at most `upto`), of `types` or all, oldest
    first, at most `limit`."""
    where = "seq > %s" + (" AND seq <= %s" if upto is not None else "")
    args: list[Any] = [since] if upto is None else [since, upto]
    if types:
        where += " AND type = ANY(%s)"
        args.append(list(types))
    query = sql.SQL(
        "SELECT seq, type, id, op, updated_at, at FROM {} WHERE " + where + " ORDER BY seq LIMIT %s"
    ).format(sql.Identifier(schema, FEED))
    return [
        Change(int(seq), str(type_), rid, str(op), stamp, str(at))
        for seq, type_, rid, op, stamp, at in conn.execute(query, (*args, limit))
    ]


def pruned_through(conn: psycopg.Connection[Any], schema: str) -> int:
    """The last sequence number retention dropped (0: none)."""
    if not exists(conn, schema, META):
        return 0
    row = conn.execute(
        sql.SQL("SELECT value FROM {} WHERE key = %s").format(sql.Identifier(schema, META)),
        (PRUNED_KEY,),
    ).fetchone()
    return int(row[0]) if row and row[0] else 0


def prune(conn: psycopg.Connection[Any], schema: str, keep_days: float) -> int:
    """Drop entries older than `keep_days` by the server's clock (a prefix of the feed:
    entries are appended in time order), remember the last one dropped, and return how many
    went."""
    feed = sql.Identifier(schema, FEED)
    cutoff = NOW.replace("clock_timestamp()", "(clock_timestamp() - make_interval(secs => %s))")
    row = conn.execute(
        sql.SQL("SELECT max(seq) FROM {} WHERE at < " + cutoff).format(feed),
        (keep_days * 86400.0,),
    ).fetchone()
    top = row[0] if row else None
    if top is None:
        return 0
    n = conn.execute(sql.SQL("DELETE FROM {} WHERE seq <= %s").format(feed), (top,)).rowcount
    conn.execute(
        sql.SQL(
            "INSERT INTO {} AS m (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET "
            "value = GREATEST(m.value::bigint, EXCLUDED.value::bigint)::text"
        ).format(sql.Identifier(schema, META)),
        (PRUNED_KEY, str(int(top))),
    )
    return int(n)


class ChangeFeed:
    """The change feed of one PostgreSQL mirror, with `sync.store.changes.ChangeFeed`'s reads
    and their meaning. A mirror without the feed reads as an empty feed."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str) -> None:
        self.conn = conn
        self.schema = schema

    def since(
        self,
        since: int = 0,
        limit: int = 1000,
        *,
        types: Sequence[str] = (),
        upto: int | None = None,
    ) -> list[Change]:
        """Entries after sequence number `since` (at most `upto`), of `types` or all, oldest
        first, at most `limit`."""
        if not exists(self.conn, self.schema, FEED):
            return []
        return read(self.conn, self.schema, since, limit, types, upto)

    def new_versions(self, type_name: str, since: int, upto: int) -> list[int]:
        """The rows of `type_name` given a version the mirror did not hold (`upsert`, `repair`:
        never a `links` entry) after `since`, through `upto`, ascending."""
        if not exists(self.conn, self.schema, FEED):
            return []
        query = sql.SQL(
            "SELECT DISTINCT id FROM {} WHERE seq > %s AND seq <= %s AND type = %s"
            " AND op IN ('upsert', 'repair') AND id IS NOT NULL ORDER BY id"
        ).format(sql.Identifier(self.schema, FEED))
        return [int(r[0]) for r in self.conn.execute(query, (since, upto, type_name))]

    def last(self) -> int:
        """The newest entry's sequence number, or the last one pruned when the feed is empty."""
        if not exists(self.conn, self.schema, FEED):
            return 0
        return max(last_seq(self.conn, self.schema), pruned_through(self.conn, self.schema))

    def pruned_through(self) -> int:
        """The last sequence number retention dropped (0: none): a reader asking from before
        it has missed entries and is told so (`sync.readers.changes`)."""
        return pruned_through(self.conn, self.schema)

    def prune(self, keep_days: float) -> int:
        """Drop entries older than `keep_days`, in one transaction (a savepoint inside the
        caller's); the sequence numbers go on, and the last one dropped is remembered."""
        with self.conn.transaction():
            return prune(self.conn, self.schema, keep_days)
