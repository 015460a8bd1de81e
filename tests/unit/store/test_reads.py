"""`sync.store.reads`: counts, ids by keyset, stamps and rows; a missing table reads as empty."""

from __future__ import annotations

from sync.store import Mirror, reads
from tests.support.store_units import staged, write

T0 = "2026-01-01T00:00:00.000Z"


def _deals(mirror: Mirror, ids: range) -> None:
    page = [
        {"id": str(i), "type": "deals", "attributes": {"title": "t", "updated_at": T0}} for i in ids
    ]
    write(mirror.conn, mirror.schema, staged("deals", page))


def test_a_table_not_made_yet_reads_as_empty(mirror: Mirror) -> None:
    schema = mirror.schema
    assert reads.count(schema, "deals", None) == 0
    assert list(reads.ids(schema, "deals", None, None)) == []
    assert reads.stamps(schema, "deals", [1]) == {}
    assert reads.get(schema, "deals", 1) is None


def test_ids_walk_past_a_thousand_and_after_a_given_id(mirror: Mirror) -> None:
    _deals(mirror, range(1, 2502))
    schema = mirror.schema
    assert list(reads.ids(schema, "deals", None, None)) == list(range(1, 2502))
    assert list(reads.ids(schema, "deals", None, 2498)) == [2499, 2500, 2501]
    stamps = reads.stamps(schema, "deals", list(range(0, 1202)))
    assert len(stamps) == 1201 and stamps[1201] == T0 and 0 not in stamps


def test_stamps_of_a_type_without_them_are_none_and_rows_come_as_dicts(mirror: Mirror) -> None:
    write(
        mirror.conn,
        mirror.schema,
        staged("tags", [{"id": "4", "type": "tags", "attributes": {"name": "x"}}]),
    )
    assert reads.stamps(mirror.schema, "tags", [4, 5]) == {4: None}
    assert reads.get(mirror.schema, "tags", 4) == {"id": 4, "name": "x"}
