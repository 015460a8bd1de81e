"""The PostgreSQL mirror's data connection (a first form; the wiring's checks replace it)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from sync.core.errors import MirrorError
from sync.store.pg.lock import application_name, masked, target


def connect(url: str, schema: str, *, readonly: bool) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection to the mirror's database; MirrorError when none can be made."""
    try:
        conn = psycopg.connect(url, autocommit=True, application_name=application_name())
    except psycopg.Error as exc:
        raise MirrorError(
            f"[mirror] url: cannot connect to {target(url)}: {masked(str(exc), url).strip()}"
        ) from None
    if readonly:
        conn.execute("SET default_transaction_read_only = on")
    else:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    return conn
