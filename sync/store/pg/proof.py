"""The proof's bookkeeping in PostgreSQL: its listing so far, its place, and what it proved.

Issue #49, the counterpart of `sync.store.proof` (read it first): `ProofBook` (`scope_proven`,
`add`, `listed`, `canaries`, `clear`, `clear_prefix`) and `ProofRecords` (`book`, `position`,
`proven`, `scopes`, `repairs`, `lags` and their writes), with the same arguments, answers and
order, held to them by the contract tests of `tests/unit/store/pg/test_proof.py`. Not wired
into `Mirror` yet.

**The same records.** `proof_position`, `proof_proven`, `repairs` and `change_lag` are JSON in
`_sync_meta` under SQLite's keys, as compact as SQLite's (`orjson`), read and changed by
SQLite's own rules (`sync.store.proof.decoded`, `as_record`, `with_proven`, `with_repairs`,
`with_lags`): a damaged record reads as absent. `_sync_meta` is the bookkeeping's
(`sync.store.pg.bookkeeping.ensure_bookkeeping` makes it, `Meta` reads and writes it). A record
is changed in one transaction that reads it `FOR UPDATE`, so two writers add up rather than one
losing the other's count (SQLite's single writer needs no such care).

**The tables** `_sync_proof_listing` and `_sync_proof_scopes` have SQLite's names, columns and
keys, made by `ensure_proof`, as SQLite makes them when the book is
first opened (`ProofRecords.book`); every read of `ProofRecords` makes nothing, and reads a
missing table (or a missing `_sync_meta`) as empty, asked of the catalogue. Unit, type, scope
and stamps are `COLLATE "C"`: compared and ordered byte by byte, as SQLite's BINARY.

**Order as SQLite's.** `canaries` puts a row without a stamp after every stamped one, as SQLite
orders NULL below every value (`DESC NULLS LAST`); `listed` answers in id order (SQLite's key
order); `scopes` names, among a type's scopes proven at its oldest time, the first in byte
order (the one SQLite's key order finds first). A negative limit of `canaries` is no limit and
a negative skip none, as in SQLite.

**Unavoidable difference.** PostgreSQL text cannot hold NUL: a unit, scope or type with one is
stored with U+FFFD in its place (`sync.store.pg.bookkeeping.no_nul`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from sync.model.stamps import normalize_or_none
from sync.store.pg.bookkeeping import (
    KEY,
    SCHEMA,
    Meta,
    Tables,
    create_tables,
    exists,
    no_nul,
    statement,
)
from sync.store.proof import (
    LAG_KEY,
    POSITION_KEY,
    PROVEN_KEY,
    REPAIRS_KEY,
    as_record,
    decoded,
    with_lags,
    with_proven,
    with_repairs,
)

LISTING = "_sync_proof_listing"
SCOPES = "_sync_proof_scopes"
#: The proof's tables (`sync.store.proof.SCHEMA_LISTING`, `SCHEMA_SCOPES`), as
#: `sync.store.pg.bookkeeping.TABLES` describes its own; the scopes hold, per (type, scope),
#: when its last unit diff ended with nothing unresolved.
TABLES: Tables = {
    LISTING: (
        (("unit", f"{KEY} NOT NULL"), ("id", "bigint NOT NULL"), ("updated_at", KEY)),
        ("unit", "id"),
    ),
    SCOPES: (
        (
            ("type", f"{KEY} NOT NULL"),
            ("scope", f"{KEY} NOT NULL"),
            ("proven_at", f"{KEY} NOT NULL"),
        ),
        ("type", "scope"),
    ),
}
META = "_sync_meta"


def ensure_proof(conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
    """Create `schema` and the proof's tables when missing, in one transaction
    (`sync.store.pg.bookkeeping.create_tables`; `_sync_meta` is the bookkeeping's own)."""
    create_tables(conn, schema, TABLES)


def _q(schema: str, table: str, template: str) -> sql.Composed:
    """`template` on one of the proof's tables (`sync.store.pg.bookkeeping.statement`)."""
    return statement(schema, table, template, TABLES)


def _rows(conn: psycopg.Connection[Any], query: Any, params: Any = ()) -> list[tuple[Any, ...]]:
    """Every row of `query` as tuples, whatever the connection's row factory."""
    cur = conn.cursor(row_factory=tuple_row).execute(query, params)
    return cur.fetchall() if cur.description else []


class ProofBook:
    """The proof's listing pages and proven scopes, over one connection: its tables made when
    it is made (`sync.store.proof.ProofBook`)."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        ensure_proof(conn, schema)
        s = schema
        self._scope = _q(
            s,
            SCOPES,
            "INSERT INTO {t} ({type}, {scope}, {proven_at}) VALUES (%s, %s, %s)"
            " ON CONFLICT ({type}, {scope}) DO UPDATE SET {proven_at} = EXCLUDED.{proven_at}",
        )
        self._add = _q(
            s,
            LISTING,
            "INSERT INTO {t} AS l ({unit}, {id}, {updated_at}) SELECT %s, i, u FROM"
            " unnest(%s::bigint[], %s::text[]) AS n(i, u) ORDER BY i"
            " ON CONFLICT ({unit}, {id}) DO UPDATE SET {updated_at} = EXCLUDED.{updated_at}"
            " WHERE l.{updated_at} IS DISTINCT FROM EXCLUDED.{updated_at}",
        )
        self._listed = _q(
            s, LISTING, "SELECT {id}, {updated_at} FROM {t} WHERE {unit} = %s ORDER BY {id}"
        )
        self._canaries = _q(
            s,
            LISTING,
            "SELECT {id} FROM {t} WHERE {unit} = %s"
            " ORDER BY {updated_at} DESC NULLS LAST, {id} DESC LIMIT %s OFFSET %s",
        )
        self._clear = _q(s, LISTING, "DELETE FROM {t} WHERE {unit} = %s")
        self._clear_prefix = _q(s, LISTING, "DELETE FROM {t} WHERE left({unit}, %s) = %s")

    def scope_proven(self, type_name: str, scope: str, at: str) -> None:
        """One scope of `type_name` (`top`, or a mall id) was proven complete `at`."""
        self.conn.execute(self._scope, (no_nul(type_name), no_nul(scope), no_nul(at)))

    def add(self, unit: str, items: Iterable[tuple[int, str | None]]) -> None:
        """One listing page's (id, updated_at) pairs for `unit` (an id given twice: its last
        stamp, as SQLite's `INSERT OR REPLACE` leaves it); an unchanged pair is not rewritten."""
        page = {int(i): normalize_or_none(u) for i, u in items}
        if page:
            stamps = [None if u is None else no_nul(u) for u in page.values()]
            self.conn.execute(self._add, (no_nul(unit), list(page), stamps))

    def listed(self, unit: str) -> Iterator[tuple[int, str | None]]:
        """What the unit's listing holds so far, in id order."""
        for rid, stamp in _rows(self.conn, self._listed, (no_nul(unit),)):
            yield int(rid), stamp

    def canaries(self, unit: str, n: int, skip: int = 0) -> list[int]:
        """The `n` most recently changed ids the unit's listing holds (after the `skip` most
        recent): known alive."""
        limit = None if n < 0 else n
        rows = _rows(self.conn, self._canaries, (no_nul(unit), limit, max(skip, 0)))
        return [int(r[0]) for r in rows]

    def clear(self, unit: str) -> None:
        """Forget a unit's listing."""
        self.conn.execute(self._clear, (no_nul(unit),))

    def clear_prefix(self, prefix: str) -> None:
        """Forget the listings of every unit whose key starts with `prefix` ("": all)."""
        key = no_nul(prefix)
        self.conn.execute(self._clear_prefix, (len(key), key))


class ProofRecords:
    """The proof's JSON records and the scopes proven on one PostgreSQL mirror
    (`sync.store.proof.ProofRecords`). Reading makes nothing."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str = SCHEMA) -> None:
        self._conn = conn
        self._schema = schema
        self._meta = Meta(conn, schema)
        self._locked = statement(
            schema, META, "SELECT {value} FROM {t} WHERE {key} = %s FOR UPDATE"
        )
        self._scopes = _q(
            schema,
            SCOPES,
            "SELECT DISTINCT ON ({type}) {type}, count(*) OVER (PARTITION BY {type}),"
            " {proven_at}, {scope} FROM {t} ORDER BY {type}, {proven_at}, {scope}",
        )

    def book(self) -> ProofBook:
        """The proof's listing pages (`ProofBook`; its tables made on first use)."""
        return ProofBook(self._conn, self._schema)

    def _get(self, key: str) -> Any:
        """The record under `key`, decoded (None: absent, damaged, or no `_sync_meta`)."""
        if not exists(self._conn, self._schema, META):
            return None
        return decoded(self._meta.get(key))

    def _set(self, key: str, value: Any) -> None:
        self._meta.set(key, None if value is None else orjson.dumps(value).decode())

    def _change(self, key: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Rewrite the record under `key` as `change` makes it from the one held, read `FOR
        UPDATE` in the same transaction."""
        with self._conn.transaction():
            row = _rows(self._conn, self._locked, (key,))
            held = as_record(decoded(row[0][0]) if row else None)
            self._set(key, change(held))

    def position(self) -> dict[str, Any] | None:
        value = self._get(POSITION_KEY)
        return value if isinstance(value, dict) else None

    def set_position(self, value: dict[str, Any] | None) -> None:
        self._set(POSITION_KEY, value)

    def proven(self) -> dict[str, dict[str, Any]]:
        """Per type: `proven_at` (None before a first clean cycle), `unresolved` rows and
        `why`."""
        return as_record(self._get(PROVEN_KEY))

    def record_proven(
        self, type_name: str, *, at: str | None, unresolved: int = 0, why: str | None = None
    ) -> None:
        """A cycle ended for `type_name`: proven complete `at` (when nothing is unresolved),
        or not, with how many rows are unresolved and why (the last proof time kept)."""
        self._change(
            PROVEN_KEY,
            lambda data: with_proven(data, type_name, at=at, unresolved=unresolved, why=why),
        )

    def scopes(self) -> dict[str, dict[str, Any]]:
        """Per type: how many scopes were proven, and the oldest scope's time and name."""
        if not exists(self._conn, self._schema, SCOPES):
            return {}  # a mirror no proof ran on
        return {
            str(name): {"scopes": int(n), "oldest_at": oldest, "oldest_scope": scope}
            for name, n, oldest, scope in _rows(self._conn, self._scopes)
        }

    def repairs(self) -> dict[str, dict[str, int]]:
        return as_record(self._get(REPAIRS_KEY))

    def count_repairs(self, type_name: str, kind: str, n: int) -> None:
        """Add `n` repairs of `kind` to `type_name`'s totals."""
        if n > 0:
            self._change(REPAIRS_KEY, lambda data: with_repairs(data, type_name, kind, n))

    def lags(self) -> dict[str, dict[str, dict[str, Any]]]:
        return as_record(self._get(LAG_KEY))

    def record_lags(self, type_name: str, path: str, seconds: list[float]) -> None:
        """Keep the count and the newest `LAG_SAMPLE` lags of (type, path)."""
        if seconds:
            self._change(LAG_KEY, lambda data: with_lags(data, type_name, path, seconds))
