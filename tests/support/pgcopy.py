"""A PostgreSQL mirror copied into an SQLite file, for the suites' SQLite-side checks.

`compare` (`tests.support.compare`) reads a mirror file; a PostgreSQL mirror is checked by the
same code through a copy: every table and view of the mirror's schema, each value as SQLite
holds it (a boolean as 0 or 1, a `jsonb` object or array as its JSON text, a `numeric` as an
int when whole, else a float), rows in id order. The copy is a test's view of the mirror, not a
second mirror: only what the checks read is kept (no indexes, no types).

`watch_deletions` is `tests.support.compare.watch_deletions` for a PostgreSQL mirror: its log
`_test_deleted` lives in the mirror's schema, so the copy carries it and `lost_rows` reads the
copy unchanged.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import psycopg
from psycopg import sql

from sync.model import catalogue

#: The deletion log, and the prefix of its function and triggers (never `_sync_changes_`: the
#: store drops those of its own before a bulk load).
DELETED = "_test_deleted"


def _as_sqlite(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def copy_to_sqlite(dsn: str, schema: str, path: Path) -> Path:
    """Copy every table and view of `schema` into the SQLite file `path` (made anew)."""
    path.unlink(missing_ok=True)
    out = sqlite3.connect(path)
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1",
                (schema,),
            )
        ]
        for name in names:
            cur = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, name)))
            assert cur.description is not None
            cols = [d.name for d in cur.description]
            quoted = ", ".join(f'"{c}"' for c in cols)
            out.execute(f'CREATE TABLE "{name}" ({quoted})')
            marks = ", ".join("?" * len(cols))
            out.executemany(
                f'INSERT INTO "{name}" VALUES ({marks})',
                ([_as_sqlite(v) for v in row] for row in cur),
            )
    out.commit()
    out.close()
    return path


def watch_deletions(dsn: str, schema: str) -> None:
    """Log every row deleted from the content tables of `schema` into `<schema>._test_deleted`
    (type, id, at), as SQLite's triggers do, so a test counts live rows lost on PostgreSQL too,
    even when a later pass brings them back. Row-level `AFTER DELETE` triggers on each content
    table that exists now, behind one PL/pgSQL function naming its table (`TG_TABLE_NAME` is the
    type); a `TRUNCATE` would pass them by, and the store issues none."""
    log = sql.Identifier(schema, DELETED)
    fn = sql.Identifier(schema, f"{DELETED}_log")
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (type text, id bigint,"
                " at double precision DEFAULT extract(epoch FROM clock_timestamp()))"
            ).format(log)
        )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN INSERT INTO {} (type, id) VALUES (TG_TABLE_NAME, OLD.id); RETURN NULL;"
                " END $$"
            ).format(fn, log)
        )
        have = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
                (schema,),
            )
        }
        for name in catalogue.TYPES:
            if name in have:  # DROP, then CREATE: `CREATE OR REPLACE TRIGGER` is 14's
                trigger, table = sql.Identifier(f"{DELETED}_{name}"), sql.Identifier(schema, name)
                conn.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(trigger, table))
                conn.execute(
                    sql.SQL(
                        "CREATE TRIGGER {} AFTER DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {}()"
                    ).format(trigger, table, fn)
                )
