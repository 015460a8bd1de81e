"""`sync.store.proof`: the proof's listing pages by unit, and its JSON records read back by status."""

from __future__ import annotations

import pytest

from sync.store import Mirror, proof
from sync.store.proof import LAG_SAMPLE, ProofBook

T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def test_a_unit_s_listing_outlives_the_book_and_gives_its_newest_ids_as_canaries(
    mirror: Mirror,
) -> None:
    book = ProofBook(mirror.conn)
    book.add("deals:top", [(1, T0), (2, "2026-01-03T00:00:00Z"), (3, T1), (4, None)])
    book.add("stores:5", [(9, T2)])
    book.add("stores:50", [(10, T2)])
    book = ProofBook(mirror.conn)  # a restart
    assert sorted(book.listed("deals:top")) == [(1, T0), (2, T2), (3, T1), (4, None)]
    assert book.canaries("deals:top", 2) == [2, 3]
    assert book.canaries("deals:top", 2, skip=2) == [1, 4]
    book.clear_prefix("stores:5")
    assert list(book.listed("stores:5")) == [] and list(book.listed("stores:50")) == []
    book.clear("deals:top")
    assert list(book.listed("deals:top")) == []


def test_a_cycle_with_unresolved_rows_keeps_the_last_proof_time(mirror: Mirror) -> None:
    conn = mirror.conn
    assert proof.proven(conn) == {}
    proof.record_proven(conn, "deals", at=T0)
    proof.record_proven(conn, "deals", at=T1, unresolved=3, why="listing shifted")
    proof.record_proven(conn, "stores", at=T1, unresolved=1, why="x")
    assert proof.proven(conn) == {
        "deals": {"proven_at": T0, "unresolved": 3, "why": "listing shifted"},
        "stores": {"proven_at": None, "unresolved": 1, "why": "x"},
    }
    proof.set_position(conn, {"unit": "deals:top", "page": 4})
    assert proof.position(conn) == {"unit": "deals:top", "page": 4}
    proof.set_position(conn, None)
    assert proof.position(conn) is None


def test_scopes_name_the_oldest_proof_of_each_type(mirror: Mirror) -> None:
    book = ProofBook(mirror.conn)
    book.scope_proven("stores", "5", T2)
    book.scope_proven("stores", "7", T1)
    book.scope_proven("stores", "5", T0)  # recorded again: the last record stands
    book.scope_proven("deals", "top", T1)
    assert proof.scopes(mirror.conn) == {
        "deals": {"scopes": 1, "oldest_at": T1, "oldest_scope": "top"},
        "stores": {"scopes": 2, "oldest_at": T0, "oldest_scope": "5"},
    }


def test_repairs_add_up_and_lags_keep_their_newest_sample(mirror: Mirror) -> None:
    conn = mirror.conn
    proof.count_repairs(conn, "deals", "missing", 2)
    proof.count_repairs(conn, "deals", "missing", 3)
    proof.count_repairs(conn, "deals", "stale", 0)  # nothing: no key
    assert proof.repairs(conn) == {"deals": {"missing": 5}}
    proof.record_lags(conn, "deals", "poll", [float(i) for i in range(LAG_SAMPLE)])
    proof.record_lags(conn, "deals", "poll", [1000.0, 1000.0004])
    entry = proof.lags(conn)["deals"]["poll"]
    assert entry["count"] == LAG_SAMPLE + 2
    assert len(entry["sample"]) == LAG_SAMPLE
    assert entry["sample"][:1] == [2.0] and entry["sample"][-2:] == [1000.0, 1000.0]


@pytest.mark.parametrize(("q", "value"), [(0.0, 1.0), (0.5, 2.0), (0.99, 4.0), (1.0, 4.0)])
def test_percentiles_are_nearest_rank(q: float, value: float) -> None:
    assert proof.percentile([4.0, 1.0, 3.0, 2.0], q) == value


def test_an_empty_sample_has_no_percentile_and_bad_json_reads_as_none(mirror: Mirror) -> None:
    assert proof.percentile([], 0.5) is None
    mirror.conn.execute("INSERT INTO _sync_meta VALUES (?, '{not json')", (proof.REPAIRS_KEY,))
    assert proof.repairs(mirror.conn) == {}
