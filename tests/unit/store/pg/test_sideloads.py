"""`sync.store.pg.sideloads`: sideloads in PostgreSQL held to the SQLite functions' contract.

The contract tests take `twin` and run twice (`tests.support.twin_books`): `sqlite` calls
`sync.store.sideloads` on an SQLite mirror, `postgres` this module's functions on a PostgreSQL
schema, both filled by the same staged pages with their included rows and links. Each asserts the
same of both: owners at the listed stamp found, their to-one column changed only there; pruning
removes only the sideloads nothing references (one level down too), then the links they owned,
passes over a type without a table, removes all of a type nothing can reference, keeps every row
when a reference is NULL (SQLite's `NOT IN`), and rolls back with the caller's transaction. The
tests after them are PostgreSQL's own: the one difference (how an owner listed twice counts),
the prune is an anti-join, and a caller without autocommit commits it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from sync.model import catalogue
from sync.store import sideloads as sqlite_sideloads
from sync.store.pg import sideloads
from sync.store.pg.schema import Schema
from sync.store.sideloads import references
from tests.support.twin_books import SCHEMA as TWIN_SCHEMA
from tests.support.twin_books import Twin, postgres_twin, sqlite_twin

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
JOBS = catalogue.TYPES["job_listings"]
SIDELOADED = ["images", "tags"]


def _mod(twin: Twin) -> Any:
    """The store's sideloads module."""
    return sqlite_sideloads if twin.kind == "sqlite" else sideloads


def _res(rid: int, type_: str, updated: str | None = T0, **rels: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"title": "t", "name": "n"}
    if updated:
        attrs["updated_at"] = updated
    out: dict[str, Any] = {"id": str(rid), "type": type_, "attributes": attrs}
    if rels:
        out["relationships"] = {
            k: {"data": [{"type": t, "id": str(i)} for t, i in v]} for k, v in rels.items()
        }
    return out


def _job(rid: int, store: int | None) -> dict[str, Any]:
    job = _res(rid, "job_listings")
    if store is not None:
        job["relationships"] = {"store": {"data": {"type": "stores", "id": str(store)}}}
    return job


def _page(twin: Twin) -> None:
    """A deal with an image and a tag; images and tags included, some linked by nothing."""
    deal = _res(1, "deals", images=[("images", 5)], tags=[("tags", 20)])
    included = [
        _res(5, "images", tags=[("tags", 21)]),
        _res(6, "images", tags=[("tags", 22)]),  # nothing links to it any more
        _res(20, "tags", None),
        _res(21, "tags", None),
        _res(22, "tags", None),
        _res(23, "tags", None),
    ]
    twin.write("deals", [deal], included)


# -- the contract: both implementations ------------------------------------------------------


def test_a_to_one_column_changes_only_where_the_stamp_is_the_listed_one(twin: Twin) -> None:
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    twin.write("job_listings", [_job(i, 8) for i in (1, 2, 3)], ())
    stamps = {1: T0, 2: T1, 3: T0}  # 2 changed since: the refetch's, not this write's
    assert m.same_stamp(conn, schema, JOBS, [1, 2, 3, 4], stamps) == {1, 3}
    assert m.same_stamp(conn, schema, JOBS, [], stamps) == set()
    changed = m.write_to_one(conn, schema, JOBS, "store_id", [(1, 9), (2, 9), (3, 8)], stamps)
    assert changed == 1  # 3 already names 8
    assert twin.raw("SELECT id, store_id FROM job_listings ORDER BY id") == [(1, 9), (2, 8), (3, 8)]
    # An owner listed twice ends with its last value (how many rows changed: see below).
    m.write_to_one(conn, schema, JOBS, "store_id", [(3, 7), (1, None), (3, 6)], stamps)
    assert twin.raw("SELECT id, store_id FROM job_listings ORDER BY id") == [
        (1, None),
        (2, 8),
        (3, 6),
    ]
    assert m.write_to_one(conn, schema, JOBS, "no_such", [(1, 9)], stamps) == 0
    assert m.write_to_one(conn, schema, JOBS, "store_id", [], stamps) == 0


def test_a_type_without_a_table_or_stamp(twin: Twin) -> None:
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    assert m.same_stamp(conn, schema, JOBS, [1], {1: T0}) == set()
    assert m.write_to_one(conn, schema, JOBS, "store_id", [(1, 9)], {1: T0}) == 0
    twin.write("tags", [_res(1, "tags", None)], ())  # tags have no `updated_at`
    tags = catalogue.TYPES["tags"]
    assert m.same_stamp(conn, schema, tags, [1], {}) == {1}  # None is None, as in SQLite
    assert m.same_stamp(conn, schema, tags, [1], {1: T0}) == set()


def test_pruning_keeps_what_listed_rows_reach_one_level_down(twin: Twin) -> None:
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    _page(twin)
    removed = m.prune_unreferenced(conn, schema, SIDELOADED)
    assert removed == {"images": 1, "tags": 2}  # image 6 first, which frees tag 22
    assert twin.raw("SELECT id FROM images") == [(5,)]
    assert twin.raw("SELECT id FROM tags ORDER BY id") == [(20,), (21,)]
    assert twin.raw("SELECT images_id, tags_id FROM images_tags") == [(5, 21)]
    assert m.prune_unreferenced(conn, schema, [*SIDELOADED, "groups"]) == {}


def test_a_type_nothing_can_reference_is_pruned_whole(twin: Twin) -> None:
    """No table that could name a tag exists: every tag goes."""
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    twin.write("tags", [_res(i, "tags", None) for i in (1, 2)], ())
    assert m.prune_unreferenced(conn, schema, ["tags"]) == {"tags": 2}
    assert twin.raw("SELECT count(*) FROM tags") == [(0,)]


def test_a_null_reference_keeps_every_row(twin: Twin) -> None:
    """SQLite deletes `WHERE id NOT IN (<references>)`: a NULL among them (a job listing
    without a store) makes that unknown for every row, and nothing goes; both stores agree."""
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    twin.write("stores", [_res(i, "stores") for i in (8, 9)], ())
    twin.write("job_listings", [_job(1, 8), _job(2, None)], ())
    assert m.prune_unreferenced(conn, schema, ["stores"]) == {}
    twin.raw("DELETE FROM job_listings WHERE id = 2")
    assert m.prune_unreferenced(conn, schema, ["stores"]) == {"stores": 1}
    assert twin.raw("SELECT id FROM stores") == [(8,)]


def test_a_prune_rolls_back_with_the_callers_transaction(twin: Twin) -> None:
    m, conn, schema = _mod(twin), twin.conn, twin.store.schema
    _page(twin)
    with pytest.raises(RuntimeError), twin.atomic():
        assert m.prune_unreferenced(conn, schema, SIDELOADED) == {"images": 1, "tags": 2}
        raise RuntimeError("stopped")
    assert twin.raw("SELECT count(*) FROM images") == [(2,)]
    assert twin.raw("SELECT count(*) FROM images_tags") == [(2,)]


# -- PostgreSQL's own ------------------------------------------------------------------------


def test_an_owner_listed_twice_counts_once(pg_db: str, tmp_path: Path) -> None:
    """The one difference: PostgreSQL's single statement counts an owner listed twice as one
    row changed when its last value differs from the one held, none when it does not; SQLite
    counts each of its updates that changed the row."""
    listed, stamps = [(1, 7), (1, 6)], {1: T0}
    counts = {}
    for twins in (sqlite_twin(tmp_path), postgres_twin(pg_db)):
        for twin in twins:
            twin.write("job_listings", [_job(1, 8)], ())
            m, conn, schema = _mod(twin), twin.conn, twin.store.schema
            counts[twin.kind] = [
                m.write_to_one(conn, schema, JOBS, "store_id", listed, stamps),  # 8 -> 6
                m.write_to_one(conn, schema, JOBS, "store_id", listed, stamps),  # 6 -> 7 -> 6
            ]
            assert twin.raw("SELECT store_id FROM job_listings") == [(6,)]
    assert counts == {"sqlite": [2, 2], "postgres": [1, 0]}


def test_the_prune_is_an_anti_join(pg_db: str) -> None:
    """`NOT EXISTS` over the references: PostgreSQL plans an anti-join, never a list probed
    once per row (`NOT IN`)."""
    for twin in postgres_twin(pg_db):
        _page(twin)
        schema: Schema = twin.store.schema
        refs = references(schema, "tags", SIDELOADED)
        delete = sideloads._unreferenced(twin.conn, schema, "tags", refs)
        plan = "\n".join(r[0] for r in twin.conn.execute(b"EXPLAIN " + delete.as_bytes(twin.conn)))
        assert "Anti Join" in plan and "SubPlan" not in plan, plan


def test_a_caller_without_autocommit_commits_the_prune(pg_db: str) -> None:
    for twin in postgres_twin(pg_db):
        _page(twin)
        with psycopg.connect(pg_db) as c:
            schema = Schema(c, TWIN_SCHEMA)
            assert sideloads.prune_unreferenced(c, schema, SIDELOADED) == {"images": 1, "tags": 2}
            assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            assert twin.raw("SELECT count(*) FROM images") == [(2,)]
            c.commit()
        assert twin.raw("SELECT count(*) FROM images") == [(1,)]
