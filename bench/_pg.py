"""Helpers the PostgreSQL benchmarks share (`pg_write.py`, `pg_backfill.py`, `freshness.py`): a
server (a private one from the machine's binaries, or `--dsn`), the settings that bear on a
write's speed, and the statistics counters read after they are flushed.

The private server is `tests.support.postgres.start` (as user `postgres` when run as root), whose
settings are the tests' (no durability); every bench passes its own over them and prints them.
Scripts import it as `from _pg import ...` and need the repository's root on the path
(`PYTHONPATH=.`) for `tests.support`.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from psycopg import sql

try:
    from tests.support import postgres
except ModuleNotFoundError:
    raise SystemExit(
        "the PostgreSQL benches import tests.support.postgres: run them from the repository's "
        "root with PYTHONPATH=."
    ) from None

as_url = postgres.as_url

#: PostgreSQL's own defaults for what the tests' private server turns off or shrinks
#: (`tests.support.postgres.SETTINGS`): a server as it is shipped, every commit flushed.
DEFAULTS = {
    "fsync": "on",
    "full_page_writes": "on",
    "synchronous_commit": "on",
    "shared_buffers": "128MB",
    "max_connections": "100",
}
#: The settings a bench prints beside its figures.
SHOWN = ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers")


def add_server_args(ap: argparse.ArgumentParser) -> None:
    """`--dsn` (a server of one's own) and `--pg-setting NAME=VALUE` (the private server's)."""
    ap.add_argument("--dsn", help="an existing server (its role needs CREATEDB)")
    ap.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the private server (repeatable)",
    )


def server_settings(base: Mapping[str, str], items: list[str]) -> dict[str, str]:
    """`base` with the `--pg-setting NAME=VALUE` items over it."""
    settings = dict(base)
    for item in items:
        name, _, value = item.partition("=")
        settings[name.strip()] = value.strip()
    return settings


@contextlib.contextmanager
def server(dsn: str | None, settings: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """A server's DSN and how it was had: `dsn` when given, else a private one with `settings`,
    stopped after."""
    if dsn:
        yield dsn, "given by --dsn"
        return
    try:
        private = postgres.start(settings)
    except postgres.PostgresUnavailable as exc:
        raise SystemExit(f"no PostgreSQL: {exc}") from None
    try:
        yield private.dsn, f"private, started in {private.started_in:.1f} s"
    finally:
        private.stop()


def describe(dsn: str) -> str:
    """The server's version and the settings that bear on a write's speed."""
    with psycopg.connect(dsn) as conn:

        def show(name: str) -> str:
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            return str(row[0]) if row else "?"

        shown = ", ".join(f"{name} {show(name)}" for name in SHOWN)
        return f"PostgreSQL {show('server_version')} ({shown})"


def flushed(conn: psycopg.Connection[Any]) -> None:
    """This backend's statistics in the shared counters before they are read (they are
    asynchronous: another backend's reach them within a second of its transaction's end)."""
    if conn.info.server_version >= 150000:
        conn.execute("SELECT pg_stat_force_next_flush()")
    else:  # the statistics collector sends them within half a second
        time.sleep(1.0)
        conn.execute("SELECT pg_stat_clear_snapshot()")
