"""A PostgreSQL mirror copied into an SQLite file, for the suites' SQLite-side checks.

`compare` (`tests.support.compare`) reads a mirror file; a PostgreSQL mirror is checked by the
same code through a copy: every table and view of the mirror's schema, each value as SQLite
holds it (a boolean as 0 or 1, a `jsonb` object or array as its JSON text, a `numeric` as an
int when whole, else a float), rows in id order. The copy is a test's view of the mirror, not a
second mirror: only what the checks read is kept (no indexes, no types).
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import psycopg
from psycopg import sql


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
