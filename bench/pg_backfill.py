"""`ccsync backfill` into PostgreSQL beside the one into SQLite, a bare COPY, a second unchanged
pass and the webhook freshness, in one run (#49, item 6).

The emulator serves N resources in its own process (its page cache on, as in
`backfill_vs_limit.py`: after the first round it costs the shared cores little). Then:
  (a) `ccsync backfill`, each run in its own process (peak RSS: the process with its page
      worker), exactly as a user runs it: a configuration file with `[mirror] path` (SQLite, its
      shipped pragmas: WAL, synchronous=NORMAL) or `[mirror] url = "postgresql://..."` (schema
      `ccsync`, a fresh database per run); `--repeat` alternating rounds, the best of each
      compared (a neighbour's burst slows a run, never speeds one up; memory: the worst run's).
  (b) the ceiling: every table of the last PostgreSQL mirror (the rows, links, included rows,
      hours and bookkeeping it holds afterwards) read out with binary COPY, then written back
      with binary COPY into empty *logged* tables of the same columns, keys and indexes
      (`LIKE ... INCLUDING ALL`), one transaction, timed to its commit: the same rows, the same
      durability, no HTTP, no parsing, no guard. Unlogged tables would skip the WAL the mirror
      cannot skip: not an honest ceiling.
  (c) `ccsync backfill` again over that mirror (a finished backfill starts afresh: every page
      listed and written again, unchanged): `pg_stat_user_tables` summed over the schema before
      and after (after a `VACUUM` of the schema, as autovacuum would have done long before a
      second pass, then autovacuum off on its tables so the counts are what the pass leaves;
      the counters read after the pass's backends ended and flushed them).
  (d) webhook received to row committed, p50/p99, the daemon on an SQLite and on a PostgreSQL
      mirror (`freshness.py`, in this process, over its own in-process emulator).
PostgreSQL: a private server from the machine's binaries (`tests.support.postgres`, as user
`postgres` when run as root) with PostgreSQL's defaults (`_pg.DEFAULTS`: fsync,
synchronous_commit and full_page_writes on, shared_buffers 128MB; `--pg-setting` changes one),
or `--dsn` for a server of your own (its role needs CREATEDB). It shares the machine's cores
with the emulator and ccsync.
Run:
    .venv/bin/pip install -e '.[postgres,bench]'
    PYTHONPATH=. .venv/bin/python bench/pg_backfill.py [--n 200000] [--repeat 3] [--no-freshness]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from _common import (
    add_emulator_args,
    alternate,
    backfill_config,
    emulator,
    run_backfill,
    sync_backfill,
)
from _pg import DEFAULTS, add_server_args, as_url, describe, flushed, server, server_settings
from freshness import measure as freshness
from psycopg import sql
from psycopg.conninfo import make_conninfo

from sync.model import catalogue

SCHEMA = "ccsync"
CEILING = "ceiling"
#: The `pg_stat_user_tables` counters summed in (c).
COUNTERS = ("n_dead_tup", "n_tup_ins", "n_tup_upd", "n_tup_del")
#: The prefixes of the bookkeeping tables (checkpoints, runs, meta): a pass writes them anew.
BOOKKEEPING = ("_sync_", "meta_")


class Databases:
    """A fresh database per PostgreSQL run; the last one kept (for (b) and (c)) until `drop`."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.made = 0
        self.last: str | None = None

    def fresh(self) -> str:
        """A new empty database's DSN; the one before it dropped."""
        self.drop()
        self.made += 1
        name = f"bench_pg_backfill_{os.getpid()}_{self.made}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.last = make_conninfo(self.dsn, dbname=name)
        return self.last

    def drop(self) -> None:
        if self.last is None:
            return
        name = psycopg.conninfo.conninfo_to_dict(self.last)["dbname"]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
            )
        self.last = None


def pg_config(base: str, tmp: str, concurrency: int, db: str) -> Path:
    """The configuration of a backfill into the schema `SCHEMA` of the database `db`."""
    return backfill_config(base, tmp, concurrency, f'url = "{as_url(db)}"\nschema = "{SCHEMA}"')


def pg_rows(db: str) -> int:
    """Rows in the listable types' tables of the mirror schema (as `count_rows` counts SQLite's)."""
    with psycopg.connect(db) as conn:
        have = {r[0] for r in conn.execute(TABLES, (SCHEMA,))}
        total = 0
        for t in catalogue.LISTABLE:
            if t in have:
                row = conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(SCHEMA, t))
                ).fetchone()
                total += row[0] if row else 0
        return total


#: The base tables of a schema.
TABLES = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 1"
)


@dataclass(frozen=True)
class Ceiling:
    """The bare COPY of (b): tables, rows, binary bytes and seconds to its commit."""

    tables: int
    rows: int
    bytes: int
    seconds: float


def copy_ceiling(db: str, tmp: Path) -> Ceiling:
    """Every table of the mirror schema read out (untimed), then COPY'd back into empty logged
    tables `LIKE ... INCLUDING ALL` of schema `CEILING`, in one transaction (timed)."""
    rows = size = 0
    with psycopg.connect(db, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(TABLES, (SCHEMA,))]
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(CEILING)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(CEILING)))
        copies: list[tuple[sql.Composed, Path]] = []
        for t in tables:
            cols = sql.SQL(", ").join(
                sql.Identifier(r[0])
                for r in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                    (f'"{SCHEMA}"."{t}"',),
                )
            )
            src, dst = sql.Identifier(SCHEMA, t), sql.Identifier(CEILING, t)
            conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(dst, src))
            dump = tmp / f"{t}.copy"
            out = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT (FORMAT BINARY)").format(cols, src)
            with dump.open("wb") as f, conn.cursor() as cur, cur.copy(out) as copy:
                for chunk in copy:
                    f.write(chunk)
            counted = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(src)).fetchone()
            rows += counted[0] if counted else 0
            size += dump.stat().st_size
            into = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(dst, cols)
            copies.append((into, dump))
        t0 = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            for into, dump in copies:
                with dump.open("rb") as f, cur.copy(into) as copy:
                    while chunk := f.read(1 << 20):
                        copy.write(chunk)
        seconds = time.perf_counter() - t0
    return Ceiling(len(tables), rows, size, seconds)


def counters(conn: psycopg.Connection[Any]) -> dict[str, dict[str, int]]:
    """Per table of the mirror schema, its `COUNTERS` (every backend's flushed first)."""
    flushed(conn)
    time.sleep(1.0)  # the pass's backends flush theirs as they end; give the last a moment
    conn.execute("SELECT pg_stat_clear_snapshot()")
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in COUNTERS)
    query = sql.SQL("SELECT relname, {} FROM pg_stat_user_tables WHERE schemaname = %s").format(
        cols
    )
    return {
        r[0]: dict(zip(COUNTERS, map(int, r[1:]), strict=True))
        for r in conn.execute(query, (SCHEMA,))
    }


@dataclass(frozen=True)
class SecondPass:
    """(c): the pass's seconds and peak RSS, and the counters before and after it."""

    seconds: float
    rss: float
    before: dict[str, dict[str, int]]
    after: dict[str, dict[str, int]]

    def total(self, which: str, counter: str) -> int:
        return sum(t[counter] for t in getattr(self, which).values())

    def delta(self, counter: str) -> int:
        return self.total("after", counter) - self.total("before", counter)

    def deltas(self, counter: str) -> dict[str, int]:
        """Per table, what the pass added to `counter`."""
        return {
            t: c[counter] - self.before.get(t, {}).get(counter, 0) for t, c in self.after.items()
        }

    def top(self, counter: str, k: int = 4) -> list[tuple[str, int]]:
        """The tables the pass added most of `counter` to."""
        d = self.deltas(counter)
        return sorted(((t, v) for t, v in d.items() if v), key=lambda x: -x[1])[:k]

    def data_delta(self, counter: str) -> int:
        """What the pass added to `counter` in the tables of the mirrored data (rows, links,
        included rows, hours): not the bookkeeping (`_sync_*`, `meta_*`)."""
        return sum(v for t, v in self.deltas(counter).items() if not t.startswith(BOOKKEEPING))


def second_pass(db: str, cfg: Path, env: dict[str, str]) -> SecondPass:
    """`ccsync backfill` again over the filled mirror, with the counters around it."""
    with psycopg.connect(db, autocommit=True) as conn:
        for (t,) in conn.execute(TABLES, (SCHEMA,)).fetchall():
            table = sql.Identifier(SCHEMA, t)
            conn.execute(sql.SQL("VACUUM {}").format(table))
            conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(table))
        before = counters(conn)
        seconds, rss = run_backfill(cfg, env)
        after = counters(conn)
    return SecondPass(seconds, rss, before, after)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_emulator_args(ap)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each")
    ap.add_argument("--changes", type=int, default=1000, help="webhooks of (d)")
    ap.add_argument("--rate", type=float, default=100.0, help="webhooks a second in (d)")
    ap.add_argument("--no-freshness", dest="freshness", action="store_false", help="skip (d)")
    add_server_args(ap)
    a = ap.parse_args()
    env = dict(os.environ)
    settings = server_settings(DEFAULTS, a.pg_setting)
    with tempfile.TemporaryDirectory(prefix="pg-backfill-") as tmpdir:
        tmp = Path(tmpdir)
        with server(a.dsn, settings) as (dsn, how):
            described = describe(dsn)
            dbs = Databases(dsn)
            try:
                with emulator(a.n, env, a.emulator_cache_mb) as base:

                    def pg(run_tmp: str) -> tuple[float, float, int]:
                        db = dbs.fresh()
                        secs, rss = run_backfill(pg_config(base, run_tmp, a.concurrency, db), env)
                        return secs, rss, pg_rows(db)

                    runs = alternate(
                        {
                            "sqlite": lambda t: sync_backfill(base, t, a.concurrency, env),
                            "pg": pg,
                        },
                        a.repeat,
                    )
                    assert dbs.last is not None
                    ceiling = copy_ceiling(dbs.last, tmp)
                    again = second_pass(
                        dbs.last, pg_config(base, tmpdir, a.concurrency, dbs.last), env
                    )
                    stored = pg_rows(dbs.last)
                if a.freshness:
                    fresh_sqlite = asyncio.run(freshness(a.changes, a.rate))
                    db = dbs.fresh()
                    fresh_pg = asyncio.run(
                        freshness(a.changes, a.rate, {"url": as_url(db), "schema": SCHEMA})
                    )
            finally:
                dbs.drop()
    print()
    s_rows, s_secs, _ = min(runs["sqlite"], key=lambda r: r[1])
    p_rows, p_secs, _ = min(runs["pg"], key=lambda r: r[1])
    s_rss, p_rss = max(r[2] for r in runs["sqlite"]), max(r[2] for r in runs["pg"])
    print(
        f"backfill into PostgreSQL vs SQLite: {a.n:,} resources served, concurrency "
        f"{a.concurrency}, best of {a.repeat} alternating runs each (`ccsync backfill`, own process)"
    )
    print(f"server: {described}, {how}; SQLite: WAL, synchronous=NORMAL (shipped)")
    print(f"{'store':<12}{'rows':>10}{'seconds':>10}{'rows/s':>10}{'peak RSS MB':>14}")
    for name, rows, secs, rss in (
        ("sqlite", s_rows, s_secs, s_rss),
        ("postgresql", p_rows, p_secs, p_rss),
    ):
        print(f"{name:<12}{rows:>10,}{secs:>10.1f}{rows / secs:>10,.0f}{rss:>14.0f}")
    print(
        f"(a) ratio PG/SQLite throughput: {(p_rows / p_secs) / (s_rows / s_secs):.2f} (goal >= 0.8); "
        f"PG peak RSS {p_rss:.0f} MB (goal < 150 MB at 1M; ccsync and its page worker)"
    )
    print(
        f"(b) ceiling: a bare binary COPY of what the PG mirror holds ({ceiling.tables} tables, "
        f"{ceiling.rows:,} rows, {ceiling.bytes / 1e6:.0f} MB) into empty logged tables with its "
        f"columns, keys and indexes, one transaction: {ceiling.seconds:.1f} s; "
        f"ratio COPY s / PG backfill s: {ceiling.seconds / p_secs:.2f} "
        f"(the backfill's share of its time a COPY would need; it also downloads and parses every page)"
    )
    dead = again.delta("n_dead_tup")
    top = ", ".join(f"{t} {v:,}" for t, v in again.top("n_dead_tup")) or "none"
    print(
        f"(c) second `ccsync backfill` over the filled mirror: {again.seconds:.1f} s, peak RSS "
        f"{again.rss:.0f} MB; n_dead_tup over schema {SCHEMA} {again.total('before', 'n_dead_tup'):,} "
        f"-> {again.total('after', 'n_dead_tup'):,} (+{dead:,}; {dead / stored:.4f} per row of "
        f"the {stored:,}; goal close to 0), {again.data_delta('n_dead_tup'):,} of them in the data "
        f"tables (not _sync_*, meta_*); most: {top}; updates +{again.delta('n_tup_upd'):,}, "
        f"deletes +{again.delta('n_tup_del'):,}, inserts +{again.delta('n_tup_ins'):,}"
    )
    if a.freshness:
        print(
            f"(d) webhook received -> row committed, {a.changes} changes at {a.rate:.0f}/s, "
            f"debounce 0 (bench/freshness.py):"
        )
        for name, lat in (("sqlite", fresh_sqlite), ("postgresql", fresh_pg)):
            print(
                f"    {name:<12} p50 {lat.p50:6.1f} ms  p99 {lat.p99:6.1f} ms  max "
                f"{lat.ms[-1]:6.1f} ms  missing {lat.missing}"
            )
        print(f"    ratio p99 PG/SQLite: {fresh_pg.p99 / fresh_sqlite.p99:.2f}")


if __name__ == "__main__":
    main()
