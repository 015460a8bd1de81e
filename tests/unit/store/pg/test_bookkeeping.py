"""`sync.store.pg.bookkeeping`: the PostgreSQL bookkeeping held to the SQLite one's contract.

The contract tests take `parts` and run twice: `sqlite` is a `Mirror` opened on a file in the
test's directory (`mirror.meta`, `.cursors`, `.runs`, `.jobs`), `postgres` the classes of this
module on a fresh database (`pg_db`, autocommit) after `ensure_bookkeeping`. Each asserts the
same values of both: what is returned, in what order and of what type, None for what is not
there, orphans closed, errors redacted. `Parts.raw` reaches a table behind the parts' backs (a
run of another process, a damaged record) with one statement written once for both. The tests
after them are PostgreSQL's own: the tables' shape against SQLite's, `ensure_bookkeeping`, a
caller's transaction, and the one difference (NUL in text).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import SecretStr
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.channel.paging import META_KEY as PAGING_KEY
from sync.core.config import UpstreamSettings
from sync.model.stamps import CANONICAL
from sync.store import Mirror
from sync.store.pg import bookkeeping
from sync.store.pg.bookkeeping import (
    SCHEMA,
    TABLES,
    Cursors,
    JobRecords,
    Meta,
    Runs,
    ensure_bookkeeping,
    exists,
)
from tests.support.rawsql import pg_rolled_back, pg_rows, sqlite_rolled_back, sqlite_rows

T0 = "2026-01-01T00:00:00.000Z"
#: The columns of a run record and of a job's, in SQLite's order (the dicts' keys).
RUN_COLUMNS = [
    "id",
    "kind",
    "started_at",
    "finished_at",
    "status",
    "rows",
    "error",
    "pid",
    "seen_at",
]
#: SQLite's declared type -> the type PostgreSQL's column has.
AFFINITY = {"INTEGER": "bigint", "TEXT": "text", "REAL": "double precision"}
JOB_COLUMNS = ["name", "started_at", "finished_at", "outcome", "error", "seconds", "next_run_at"]


@dataclass
class Parts:
    """One implementation's bookkeeping parts, and what a test needs behind them."""

    meta: Any
    cursors: Any
    runs: Any
    jobs: Any
    #: One statement on the bookkeeping tables (SQLite's `?` placeholders): its rows.
    raw: Callable[..., list[tuple[Any, ...]]]
    #: A transaction the block's writes are made in, rolled back at its end.
    rolled_back: Callable[[], contextlib.AbstractContextManager[None]]


def _sqlite(tmp_path: Path) -> Iterator[Parts]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn = mirror.conn

    raw = sqlite_rows(conn)

    rolled_back = sqlite_rolled_back(conn)

    try:
        yield Parts(mirror.meta, mirror.cursors, mirror.runs, mirror.jobs, raw, rolled_back)
    finally:
        mirror.close()


def _postgres(dsn: str) -> Iterator[Parts]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_bookkeeping(conn, SCHEMA)

        raw = pg_rows(conn, SCHEMA, r"_sync_\w+")

        rolled_back = pg_rolled_back(conn)

        yield Parts(
            Meta(conn, SCHEMA),
            Cursors(conn, SCHEMA),
            Runs(conn, SCHEMA),
            JobRecords(conn, SCHEMA),
            raw,
            rolled_back,
        )


@pytest.fixture(params=["sqlite", "postgres"])
def parts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Parts]:
    """The bookkeeping parts of either mirror, empty (the PostgreSQL server is started only
    for the `postgres` runs)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_db"))


def _id(record: dict[str, Any] | None) -> int:
    """The id of a run record that must be there."""
    assert record is not None
    return int(record["id"])


# -- the contract: both implementations ------------------------------------------------------


def test_meta_set_get_and_remove(parts: Parts) -> None:
    meta = parts.meta
    assert meta.get("k") is None
    meta.set("k", "1")
    meta.set("k", "2")
    meta.set("K", "upper")  # keys are exact: no case folding
    assert (meta.get("k"), meta.get("K")) == ("2", "upper")
    meta.set("k", "")
    assert meta.get("k") == ""
    meta.set("k", None)
    meta.set("never", None)  # removing what is not there is no error
    assert meta.get("k") is None and meta.get("never") is None
    meta.set("élan ✓", '{"a": "ü"}')
    assert meta.get("élan ✓") == '{"a": "ü"}'


def test_meta_is_the_store_a_client_keeps_what_it_learns_in(parts: Parts) -> None:
    settings = UpstreamSettings(base_url="http://u", email="a@x", password=SecretStr("pw"))
    first = ChannelClient(settings, store=parts.meta)
    first.session.paging.learn(30)
    assert parts.meta.get(PAGING_KEY) is not None
    again = ChannelClient(settings, store=parts.meta)
    assert again.session.paging.size == 30


def test_a_record_of_numbers_survives_damage_and_keeps_each_name(parts: Parts) -> None:
    meta = parts.meta
    assert meta.numbers("k") == {}
    meta.set_number("k", "deals", 7)
    meta.set_number("k", "contacts", 9)
    meta.set_number("k", "deals", 2**62)
    assert meta.numbers("k") == {"deals": 2**62, "contacts": 9}
    assert list(meta.numbers("k")) == ["deals", "contacts"]  # the record's order is kept
    meta.set("k", '{"deals": true, "x": "y", "f": 1.5, "contacts": 3}')  # whole numbers only
    assert meta.numbers("k") == {"contacts": 3}
    for damaged in ("not json", "[1, 2]", "7", '"text"', "null", "", '{"a": 1'):
        meta.set("k", damaged)
        assert meta.numbers("k") == {}, damaged
    meta.set_number("k", "deals", 1)  # a damaged record starts again
    assert meta.get("k") == '{"deals":1}'


def test_cursors_per_type_and_scope_with_when_each_moved(parts: Parts) -> None:
    cursors = parts.cursors
    assert cursors.get("deals", "") is None
    cursors.set("deals", "", "2026-01-01T00:00:00.000Z")
    cursors.set("deals", "mall=1", "2026-01-02T00:00:00.000Z")
    cursors.set("deals", "", "2026-01-03T00:00:00.000Z")
    assert cursors.get("deals", "") == "2026-01-03T00:00:00.000Z"
    assert cursors.get("deals", "mall=1") == "2026-01-02T00:00:00.000Z"
    assert cursors.get("stores", "") is None and cursors.get("deals", "mall=2") is None
    moved = parts.raw("SELECT type, scope, updated_at FROM _sync_cursors ORDER BY scope")
    assert [(t, s) for t, s, _ in moved] == [("deals", ""), ("deals", "mall=1")]
    assert all(CANONICAL.fullmatch(at) for _, _, at in moved)


def test_a_write_inside_a_transaction_stays_in_it(parts: Parts) -> None:
    """No part commits on its own: a rolled-back transaction takes every write with it."""
    with parts.rolled_back():
        parts.meta.set("k", "v")
        parts.cursors.set("deals", "", "c")
        parts.jobs.scheduled("poll", T0)
        run = parts.runs.start("backfill")
        assert parts.runs.last("backfill")["id"] == run  # seen inside it
    assert parts.meta.get("k") is None and parts.cursors.get("deals", "") is None
    assert parts.jobs.all() == {} and parts.runs.recent() == []
    assert parts.runs.last("backfill") is None


def test_a_run_ends_with_its_status_and_an_error_without_secrets(parts: Parts) -> None:
    run = parts.runs.start("backfill")
    assert isinstance(run, int)
    assert parts.raw(
        "SELECT kind, status, pid, seen_at = started_at FROM _sync_runs WHERE id = ?", run
    ) == [("backfill", "running", os.getpid(), True)]
    parts.runs.finish(
        run, status="failed", rows=12, error="GET /deals?auth_token=abc123&page=2: 500"
    )
    (record,) = parts.runs.recent()
    assert list(record) == RUN_COLUMNS
    assert (record["id"], record["kind"], record["status"], record["rows"]) == (
        run,
        "backfill",
        "failed",
        12,
    )
    assert record["error"] == "GET /deals?auth_token=***&page=2: 500"
    assert record["finished_at"] == record["seen_at"] and record["pid"] == os.getpid()
    assert all(CANONICAL.fullmatch(record[c]) for c in ("started_at", "finished_at", "seen_at"))
    again = parts.runs.start("backfill")
    parts.runs.finish(again, status="ok", rows=None, error=None)
    assert parts.runs.last("backfill") == {
        **parts.runs.recent()[-1],
        "status": "ok",
        "rows": None,
        "error": None,
    }


def test_a_heartbeat_moves_only_this_process_running_runs(parts: Parts) -> None:
    mine = parts.runs.start("daemon")
    other = parts.runs.start("daemon")
    done = parts.runs.start("backfill")
    parts.runs.finish(done, status="ok", rows=0, error=None)
    parts.raw("UPDATE _sync_runs SET seen_at = ?", T0)
    parts.raw("UPDATE _sync_runs SET pid = 1 WHERE id = ?", other)
    parts.runs.heartbeat()
    seen = dict(parts.raw("SELECT id, seen_at FROM _sync_runs"))
    assert seen[mine] > T0 and CANONICAL.fullmatch(seen[mine])
    assert (seen[other], seen[done]) == (T0, T0)


def test_orphans_are_interrupted_keeping_when_they_were_last_seen(parts: Parts) -> None:
    done = parts.runs.start("backfill")
    parts.runs.finish(done, status="ok", rows=1, error=None)
    lost = parts.runs.start("daemon")
    never_seen = parts.runs.start("backfill")
    parts.raw("UPDATE _sync_runs SET seen_at = ?, pid = 1 WHERE id = ?", T0, lost)
    parts.raw("UPDATE _sync_runs SET seen_at = NULL, started_at = ? WHERE id = ?", T0, never_seen)
    with capture_logs() as logs:
        assert parts.runs.close_orphans() == 2
    assert parts.runs.close_orphans() == 0
    assert [(e["event"], e["run"], e["kind"], e["last_seen"]) for e in logs] == [
        ("run.interrupted", lost, "daemon", T0),
        ("run.interrupted", never_seen, "backfill", T0),
    ]
    finished = parts.runs.recent()[0]["finished_at"]
    assert [(r["id"], r["status"], r["seen_at"]) for r in parts.runs.recent()] == [
        (done, "ok", finished),
        (lost, "interrupted", T0),
        (never_seen, "interrupted", T0),
    ]
    daemon = parts.runs.last("daemon")
    assert daemon is not None and (daemon["id"], daemon["status"]) == (lost, "interrupted")
    assert daemon["finished_at"] is None


def test_recent_gives_the_last_runs_oldest_first(parts: Parts) -> None:
    assert parts.runs.recent() == []
    ids = [parts.runs.start("backfill") for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert [r["id"] for r in parts.runs.recent(limit=3)] == ids[2:]
    assert [r["id"] for r in parts.runs.recent()] == ids
    assert parts.runs.recent(limit=0) == []
    assert [r["id"] for r in parts.runs.recent(limit=-1)] == ids  # no limit, as SQLite's -1


def test_last_is_the_last_of_its_kind_whatever_came_after(parts: Parts) -> None:
    assert parts.runs.last("daemon") is None
    daemon = parts.runs.start("daemon")
    later = [parts.runs.start("backfill") for _ in range(3)]
    found = parts.runs.last("daemon")
    assert found is not None and (found["id"], found["status"]) == (daemon, "running")
    assert list(found) == RUN_COLUMNS
    assert parts.runs.last("backfill")["id"] == later[-1]
    assert parts.runs.last("Daemon") is None


def test_reads_of_a_mirror_without_the_tables(parts: Parts) -> None:
    """A mirror written before `_sync_jobs`, or read without `_sync_runs`: nothing, no error."""
    parts.raw("DROP TABLE _sync_runs")
    parts.raw("DROP TABLE _sync_jobs")
    assert parts.runs.last("daemon") is None
    assert parts.jobs.all() == {}


def test_a_job_started_finished_and_scheduled(parts: Parts) -> None:
    jobs = parts.jobs
    assert jobs.all() == {}
    jobs.started("poll", "t1")
    jobs.finished("poll", at="t2", outcome="error", error="boom", seconds=1.5)
    jobs.scheduled("poll", "t3")
    jobs.started("poll", "t4")  # the outcome stays the previous run's until it ends
    row = jobs.all()["poll"]
    assert list(row) == JOB_COLUMNS
    assert (row["started_at"], row["finished_at"], row["outcome"]) == ("t4", "t2", "error")
    assert (row["error"], row["seconds"], row["next_run_at"]) == ("boom", 1.5, "t3")
    jobs.finished("poll", at="t5", outcome="ok", error=None, seconds=0)
    row = jobs.all()["poll"]
    assert (row["error"], row["seconds"], type(row["seconds"])) == (None, 0.0, float)
    jobs.scheduled("proof", "t6")  # a job only ever scheduled
    assert jobs.all()["proof"] == dict.fromkeys(JOB_COLUMNS) | {
        "name": "proof",
        "next_run_at": "t6",
    }


def test_jobs_are_listed_by_name_in_byte_order(parts: Parts) -> None:
    names = ["é", "poll", "B", "_x", "a", "ä", "Z"]
    for name in names:
        parts.jobs.scheduled(name, T0)
    assert list(parts.jobs.all()) == sorted(names, key=str.encode)


def test_a_job_error_is_stored_redacted(parts: Parts) -> None:
    parts.jobs.finished(
        "poll", at="t", outcome="error", error="GET /deals?token=s3cret failed", seconds=0
    )
    assert "s3cret" not in parts.jobs.all()["poll"]["error"]


def test_a_retired_job_goes(parts: Parts) -> None:
    parts.jobs.scheduled("reconcile", "t1")
    parts.jobs.scheduled("poll", "t1")
    parts.jobs.retired("reconcile")
    parts.jobs.retired("never")
    assert list(parts.jobs.all()) == ["poll"]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_tables_have_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """Each table as SQLite has it: its columns in order, each of the type that reads back as
    SQLite's does; text that is a key, name or stamp compared byte by byte (collation C)."""
    ensure_bookkeeping(conn)
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        for table in TABLES:
            lite = [
                (r[1], AFFINITY[r[2]]) for r in mirror.conn.execute(f"PRAGMA table_info({table})")
            ]
            pg = conn.execute(
                "SELECT column_name, data_type, collation_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (SCHEMA, table),
            ).fetchall()
            assert [(name, kind) for name, kind, _ in pg] == lite, table
            keys = {c for c, t in TABLES[table][0] if t.startswith(bookkeeping.KEY)}
            assert {name for name, _, coll in pg if coll == "C"} == keys, table
    finally:
        mirror.close()


def test_ensure_is_idempotent_and_keeps_what_is_there(conn: psycopg.Connection[Any]) -> None:
    schema = 'Odd "schema"'  # quoted wherever it is named
    assert not exists(conn, schema, "_sync_meta")
    ensure_bookkeeping(conn, schema)
    Meta(conn, schema).set("k", "v")
    ensure_bookkeeping(conn, schema)
    assert Meta(conn, schema).get("k") == "v"
    assert all(exists(conn, schema, t) for t in TABLES)
    assert not exists(conn, SCHEMA, "_sync_meta")  # only the schema it was given


def test_create_tables_makes_indexes_once_beside_the_tables(
    conn: psycopg.Connection[Any],
) -> None:
    """Another part's tables and SQLite-named indexes (`Indexes`), in the same transaction."""
    tables: bookkeeping.Tables = {
        "things": ((("a", "text NOT NULL"), ("b", "bigint"), ("c", "text")), ("a", "b"))
    }
    indexes: bookkeeping.Indexes = {"idx_things_c": ("things", ("c", "b"))}
    bookkeeping.create_tables(conn, 'Odd "s"', tables, indexes)
    conn.execute(
        sql.SQL("INSERT INTO {} VALUES ('x', 1)").format(sql.Identifier('Odd "s"', "things"))
    )
    bookkeeping.create_tables(conn, 'Odd "s"', tables, indexes)  # again: table and row kept
    found = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1",
        ('Odd "s"',),
    ).fetchall()
    assert [name for name, _ in found] == ["idx_things_c", "things_pkey"]
    assert found[0][1].endswith("(c, b)") and found[1][1].endswith("(a, b)")
    assert conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier('Odd "s"', "things"))
    ).fetchone() == (1,)


def test_two_processes_ensuring_at_once_both_succeed(pg_db: str) -> None:
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def ensure() -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                barrier.wait()
                ensure_bookkeeping(c, "raced")
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=ensure) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_caller_without_autocommit_commits_the_writes(pg_db: str) -> None:
    """Without autocommit psycopg begins a transaction at the first statement: the parts write
    into it and leave it open, and another connection sees nothing until the caller commits."""
    with psycopg.connect(pg_db) as c, psycopg.connect(pg_db, autocommit=True) as other:
        ensure_bookkeeping(c)
        c.commit()
        Meta(c).set("k", "v")
        run = Runs(c).start("daemon")
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert Meta(other).get("k") is None and Runs(other).last("daemon") is None
        c.commit()
        assert Meta(other).get("k") == "v" and _id(Runs(other).last("daemon")) == run


def test_a_read_of_a_missing_table_leaves_the_callers_transaction_usable(
    conn: psycopg.Connection[Any],
) -> None:
    """SQLite's parts catch the error of a missing table; here the catalogue is asked instead,
    since a failed statement would abort the transaction around it."""
    with conn.transaction():
        assert Runs(conn, "nowhere").last("daemon") is None
        assert JobRecords(conn, "nowhere").all() == {}
        ensure_bookkeeping(conn)
        Meta(conn).set("k", "v")
    assert Meta(conn).get("k") == "v"


def test_a_connection_with_another_row_factory_reads_the_same(pg_db: str) -> None:
    from psycopg.rows import namedtuple_row

    with psycopg.connect(pg_db, autocommit=True, row_factory=namedtuple_row) as c:
        ensure_bookkeeping(c)
        Meta(c).set("k", "v")
        Cursors(c).set("deals", "", T0)
        run = Runs(c).start("daemon")
        JobRecords(c).scheduled("poll", T0)
        assert (Meta(c).get("k"), Cursors(c).get("deals", "")) == ("v", T0)
        assert Runs(c).recent()[0]["id"] == run and _id(Runs(c).last("daemon")) == run
        assert JobRecords(c).all()["poll"]["next_run_at"] == T0


def test_nul_in_text_is_kept_as_a_replacement_character(conn: psycopg.Connection[Any]) -> None:
    """The one difference from SQLite: PostgreSQL text cannot hold NUL, so it reads back as
    U+FFFD (a key too: `a\\0` and `a\\ufffd` are one record) rather than failing the write."""
    ensure_bookkeeping(conn)
    meta, jobs = Meta(conn), JobRecords(conn)
    meta.set("a\x00", "v\x00w")
    assert meta.get("a\x00") == meta.get("a\ufffd") == "v\ufffdw"
    jobs.finished("poll", at=T0, outcome="error", error="bad\x00byte", seconds=1)
    assert jobs.all()["poll"]["error"] == "bad\ufffdbyte"
    runs = Runs(conn)
    run = runs.start("daemon")
    runs.finish(run, status="failed", rows=None, error="\x00")
    last = runs.last("daemon")
    assert last is not None and last["error"] == "\ufffd"
    assert bookkeeping.no_nul("plain") == "plain"


def test_statements_name_only_the_tables_columns() -> None:
    with pytest.raises(KeyError):
        bookkeeping.statement(SCHEMA, "_sync_meta", "SELECT {nope} FROM {t}")
    composed = bookkeeping.statement("s", "_sync_meta", "SELECT {value} FROM {t}")
    assert isinstance(composed, sql.Composed)
