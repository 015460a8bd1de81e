"""`sync.store.sideloads`: linkage written only under an unchanged stamp, and unreferenced sideloads pruned."""

from __future__ import annotations

from typing import Any

from sync.model import catalogue
from sync.store import Mirror, sideloads
from tests.support.store_units import rows, staged, write

T0, T1 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
JOBS = catalogue.TYPES["job_listings"]


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


def test_a_to_one_column_changes_only_where_the_stamp_is_the_listed_one(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    jobs = [_res(i, "job_listings") for i in (1, 2, 3)]
    for job in jobs:
        job["relationships"] = {"store": {"data": {"type": "stores", "id": "8"}}}
    write(conn, schema, staged("job_listings", jobs))
    stamps = {1: T0, 2: T1, 3: T0}  # 2 changed since: the refetch's, not this write's
    assert sideloads.same_stamp(conn, schema, JOBS, [1, 2, 3, 4], stamps) == {1, 3}
    changed = sideloads.write_to_one(
        conn, schema, JOBS, "store_id", [(1, 9), (2, 9), (3, 8)], stamps
    )
    assert changed == 1  # 3 already names 8
    assert rows(conn, "SELECT id, store_id FROM job_listings ORDER BY id") == [
        (1, 9),
        (2, 8),
        (3, 8),
    ]
    assert sideloads.write_to_one(conn, schema, JOBS, "no_such", [(1, 9)], stamps) == 0


def test_pruning_keeps_what_listed_rows_reach_one_level_down(mirror: Mirror) -> None:
    conn, schema = mirror.conn, mirror.schema
    deal = _res(1, "deals", images=[("images", 5)], tags=[("tags", 20)])
    included = [
        _res(5, "images", tags=[("tags", 21)]),
        _res(6, "images", tags=[("tags", 22)]),  # nothing links to it any more
        _res(20, "tags", None),
        _res(21, "tags", None),
        _res(22, "tags", None),
        _res(23, "tags", None),
    ]
    write(conn, schema, staged("deals", [deal], included))
    removed = sideloads.prune_unreferenced(conn, schema, ["images", "tags"])
    assert removed == {"images": 1, "tags": 2}  # image 6 first, which frees tag 22
    assert rows(conn, "SELECT id FROM images") == [(5,)]
    assert rows(conn, "SELECT id FROM tags ORDER BY id") == [(20,), (21,)]
    assert rows(conn, "SELECT images_id, tags_id FROM images_tags") == [(5, 21)]
    assert sideloads.prune_unreferenced(conn, schema, ["images", "tags", "groups"]) == {}
