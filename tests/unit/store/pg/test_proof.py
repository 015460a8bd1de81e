"""`sync.store.pg.proof`: the PostgreSQL proof bookkeeping held to the SQLite one's contract.

The contract tests take `store` and run twice: `sqlite` is a `Mirror` opened on a file in the
test's directory (`mirror.proof`), `postgres` this module's `ProofRecords` on a fresh database
(`pg_db`, autocommit) after `ensure_bookkeeping`, in a schema with an awkward name. Each asserts
the same of both: the position, the listing book (pages, canaries, clears), the proven records
and scopes, repairs and lags, read back as SQLite reads them, and damaged records read as
absent. `Store.raw` reaches the tables behind the parts' backs with one statement written once
for both. The tests after them are PostgreSQL's own: the tables' shape, two writers counting at
once, a mirror without `_sync_meta`, an unchanged page not rewritten, and NUL in text.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.store import Mirror, proof
from sync.store.pg.bookkeeping import ensure_bookkeeping, exists
from sync.store.pg.proof import ProofBook, ProofRecords, ensure_proof
from sync.store.proof import LAG_SAMPLE
from tests.support.rawsql import pg_rolled_back, pg_run, sqlite_rolled_back, sqlite_rows

SCHEMA = 'Proof "p"'
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"
AFFINITY = {"INTEGER": "bigint", "TEXT": "text"}


@dataclass
class Store:
    """One implementation's proof records, and what a test needs behind them."""

    kind: str
    records: Any
    #: One statement on the mirror's `_sync_*` tables (named bare, `?` placeholders).
    raw: Callable[..., list[tuple[Any, ...]]]
    #: A transaction the block's writes are made in, rolled back at its end.
    rolled_back: Callable[[], contextlib.AbstractContextManager[None]]
    #: Whether a table exists.
    has_table: Callable[[str], bool]


def _sqlite(tmp_path: Path) -> Iterator[Store]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn = mirror.conn

    raw = sqlite_rows(conn)

    rolled_back = sqlite_rolled_back(conn)

    def has_table(name: str) -> bool:
        return bool(raw("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name))

    try:
        yield Store("sqlite", mirror.proof, raw, rolled_back, has_table)
    finally:
        mirror.close()


def _run(conn: psycopg.Connection[Any], statement: str, params: Any) -> list[tuple[Any, ...]]:
    return pg_run(conn, SCHEMA, r"_sync_\w+", statement, params)


def _postgres(dsn: str) -> Iterator[Store]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_bookkeeping(conn, SCHEMA)

        rolled_back = pg_rolled_back(conn)

        yield Store(
            "postgres",
            ProofRecords(conn, SCHEMA),
            lambda statement, *params: _run(conn, statement, params),
            rolled_back,
            lambda name: exists(conn, SCHEMA, name),
        )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The proof records of either mirror, empty (the PostgreSQL server is started only for
    the `postgres` runs)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_db"))


# -- the contract: both implementations ------------------------------------------------------


def test_reads_make_nothing_and_answer_empty_on_a_mirror_no_proof_ran_on(store: Store) -> None:
    records = store.records
    assert records.position() is None and records.proven() == {} and records.scopes() == {}
    assert records.repairs() == {} and records.lags() == {}
    assert not store.has_table("_sync_proof_listing") and not store.has_table("_sync_proof_scopes")
    records.book()
    assert store.has_table("_sync_proof_listing") and store.has_table("_sync_proof_scopes")
    assert records.scopes() == {}


def test_a_unit_s_listing_outlives_the_book_and_gives_its_newest_ids_as_canaries(
    store: Store,
) -> None:
    book = store.records.book()
    book.add("deals:top", [(1, T0), (2, "2026-01-03T00:00:00Z"), (3, T1), (4, None)])
    book.add("stores:5", [(9, T2)])
    book.add("stores:50", [(10, T2)])
    book = store.records.book()  # a restart
    assert list(book.listed("deals:top")) == [(1, T0), (2, T2), (3, T1), (4, None)]  # id order
    assert book.canaries("deals:top", 2) == [2, 3]
    assert book.canaries("deals:top", 2, skip=2) == [1, 4]  # no stamp: last
    assert book.canaries("deals:top", -1) == [2, 3, 1, 4]  # a negative limit is none
    assert book.canaries("deals:top", 1, skip=-5) == [2]  # a negative skip is none
    assert book.canaries("nothing", 3) == []
    book.clear_prefix("stores:5")
    assert list(book.listed("stores:5")) == [] and list(book.listed("stores:50")) == []
    book.clear("deals:top")
    assert list(book.listed("deals:top")) == []


def test_a_page_given_again_takes_the_last_stamp_of_each_id(store: Store) -> None:
    book = store.records.book()
    book.add("u", [(1, T0), (2, T0)])
    book.add("u", [(1, T1), (1, T2), (3, None)])
    book.add("u", iter([(2, None)]))  # any iterable
    book.add("u", [])
    assert list(book.listed("u")) == [(1, T2), (2, None), (3, None)]


def test_clear_prefix_is_literal_and_empty_clears_every_unit(store: Store) -> None:
    book = store.records.book()
    for unit in ("a_%:1", "ab:2", "a_%x", "b"):
        book.add(unit, [(1, T0)])
    book.clear_prefix("a_%")  # no wildcard
    assert store.raw("SELECT unit FROM _sync_proof_listing ORDER BY unit") == [("ab:2",), ("b",)]
    book.clear_prefix("")
    assert store.raw("SELECT count(*) FROM _sync_proof_listing") == [(0,)]


def test_a_cycle_with_unresolved_rows_keeps_the_last_proof_time(store: Store) -> None:
    records = store.records
    records.record_proven("deals", at=T0)
    records.record_proven("deals", at=T1, unresolved=3, why="listing shifted")
    records.record_proven("stores", at=T1, unresolved=1, why="x")
    records.record_proven("events", at=None)
    assert records.proven() == {
        "deals": {"proven_at": T0, "unresolved": 3, "why": "listing shifted"},
        "stores": {"proven_at": None, "unresolved": 1, "why": "x"},
        "events": {"proven_at": None, "unresolved": 0, "why": None},
    }
    records.set_position({"unit": "deals:top", "page": 4})
    assert records.position() == {"unit": "deals:top", "page": 4}
    assert store.raw("SELECT value FROM _sync_meta WHERE key = ?", proof.POSITION_KEY) == [
        ('{"unit":"deals:top","page":4}',)  # SQLite's compact JSON
    ]
    records.set_position(None)
    assert records.position() is None
    assert store.raw("SELECT count(*) FROM _sync_meta WHERE key = ?", proof.POSITION_KEY) == [(0,)]


def test_scopes_name_the_oldest_proof_of_each_type(store: Store) -> None:
    book = store.records.book()
    book.scope_proven("stores", "5", T2)
    book.scope_proven("stores", "7", T1)
    book.scope_proven("stores", "5", T0)  # recorded again: the last record stands
    book.scope_proven("deals", "top", T1)
    book.scope_proven("tags", "9", T1)
    book.scope_proven("tags", "10", T1)  # a tie: the first scope in byte order
    book.scope_proven("tags", "B", T2)
    assert store.records.scopes() == {
        "deals": {"scopes": 1, "oldest_at": T1, "oldest_scope": "top"},
        "stores": {"scopes": 2, "oldest_at": T0, "oldest_scope": "5"},
        "tags": {"scopes": 3, "oldest_at": T1, "oldest_scope": "10"},
    }
    assert list(store.records.scopes()) == ["deals", "stores", "tags"]


def test_repairs_add_up_and_lags_keep_their_newest_sample(store: Store) -> None:
    records = store.records
    records.count_repairs("deals", "missing", 2)
    records.count_repairs("deals", "missing", 3)
    records.count_repairs("deals", "stale", 0)  # nothing: no key
    records.count_repairs("deals", "stale", -1)
    assert records.repairs() == {"deals": {"missing": 5}}
    records.record_lags("deals", "poll", [float(i) for i in range(LAG_SAMPLE)])
    records.record_lags("deals", "poll", [1000.0, 1000.0004])
    records.record_lags("deals", "poll", [])  # nothing
    records.record_lags("deals", "webhook", [0.5])
    entry = records.lags()["deals"]["poll"]
    assert entry["count"] == LAG_SAMPLE + 2
    assert len(entry["sample"]) == LAG_SAMPLE
    assert entry["sample"][:1] == [2.0] and entry["sample"][-2:] == [1000.0, 1000.0]
    assert records.lags()["deals"]["webhook"] == {"count": 1, "sample": [0.5]}


def test_a_damaged_record_reads_as_absent_and_is_started_again(store: Store) -> None:
    for key in (proof.REPAIRS_KEY, proof.POSITION_KEY, proof.PROVEN_KEY, proof.LAG_KEY):
        store.raw("INSERT INTO _sync_meta (key, value) VALUES (?, '{not json')", key)
    records = store.records
    assert records.repairs() == {} and records.position() is None
    assert records.proven() == {} and records.lags() == {}
    store.raw("UPDATE _sync_meta SET value = '[1, 2]'")  # JSON, not an object
    assert records.repairs() == {} and records.position() is None and records.proven() == {}
    records.count_repairs("deals", "missing", 1)
    assert records.repairs() == {"deals": {"missing": 1}}


def test_writes_inside_a_transaction_stay_in_it(store: Store) -> None:
    records = store.records
    book = records.book()
    with store.rolled_back():
        records.set_position({"unit": "u"})
        records.count_repairs("deals", "missing", 1)
        records.record_proven("deals", at=T0)
        book.add("u", [(1, T0)])
        book.scope_proven("deals", "top", T0)
        assert records.repairs() == {"deals": {"missing": 1}}
    assert records.position() is None and records.repairs() == {} and records.proven() == {}
    assert list(book.listed("u")) == [] and records.scopes() == {}


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_the_tables_have_sqlites_names_columns_and_types(
    conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    ensure_proof(conn, SCHEMA)
    ensure_proof(conn, SCHEMA)  # idempotent
    lite = sqlite3.connect(tmp_path / "m.db")
    try:
        lite.execute(proof.SCHEMA_LISTING)
        lite.execute(proof.SCHEMA_SCOPES)
        for table, keyed in (
            ("_sync_proof_listing", {"unit", "updated_at"}),
            ("_sync_proof_scopes", {"type", "scope", "proven_at"}),
        ):
            want = [(r[1], AFFINITY[r[2]]) for r in lite.execute(f"PRAGMA table_info({table})")]
            got = conn.execute(
                "SELECT column_name, data_type, collation_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (SCHEMA, table),
            ).fetchall()
            assert [(name, kind) for name, kind, _ in got] == want, table
            assert {name for name, _, coll in got if coll == "C"} == keyed, table
    finally:
        lite.close()


def test_two_writers_counting_at_once_add_up(pg_db: str) -> None:
    with psycopg.connect(pg_db, autocommit=True) as c:
        ensure_bookkeeping(c, SCHEMA)
        ProofRecords(c, SCHEMA).count_repairs("deals", "missing", 1)
        ProofRecords(c, SCHEMA).record_lags("deals", "poll", [1.0])  # each record held first
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def count() -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                records = ProofRecords(c, SCHEMA)
                barrier.wait()
                for _ in range(25):
                    records.count_repairs("deals", "missing", 1)
                    records.record_lags("deals", "poll", [1.0])
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=count) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    with psycopg.connect(pg_db, autocommit=True) as c:
        records = ProofRecords(c, SCHEMA)
        assert records.repairs() == {"deals": {"missing": 101}}
        assert records.lags()["deals"]["poll"]["count"] == 101


def test_a_mirror_without_the_bookkeeping_reads_empty_and_stays_usable(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.transaction():
        records = ProofRecords(conn, SCHEMA)
        assert records.position() is None and records.repairs() == {}
        assert records.scopes() == {} and records.lags() == {} and records.proven() == {}
        assert not exists(conn, SCHEMA, "_sync_meta")
        ensure_bookkeeping(conn, SCHEMA)
        records.set_position({"page": 1})
    assert ProofRecords(conn, SCHEMA).position() == {"page": 1}


def test_a_page_listed_again_unchanged_is_not_rewritten(conn: psycopg.Connection[Any]) -> None:
    book = ProofBook(conn, SCHEMA)
    book.add("u", [(1, T0), (2, T1)])
    before = _run(conn, "SELECT id, xmin::text FROM _sync_proof_listing ORDER BY id", ())
    book.add("u", [(1, T0), (2, T2)])
    after = _run(conn, "SELECT id, xmin::text FROM _sync_proof_listing ORDER BY id", ())
    assert after[0] == before[0] and after[1] != before[1]


def test_nul_in_text_is_kept_as_a_replacement_character(conn: psycopg.Connection[Any]) -> None:
    ensure_bookkeeping(conn, SCHEMA)
    book = ProofRecords(conn, SCHEMA).book()
    book.add("u\x00", [(1, T0)])
    assert list(book.listed("u\ufffd")) == [(1, T0)]
    book.scope_proven("de\x00als", "top", T0)
    assert list(ProofRecords(conn, SCHEMA).scopes()) == ["de\ufffdals"]
