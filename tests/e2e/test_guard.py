"""An older copy of a row changes nothing: not its columns, not its links, not its to-one ids.

And stamps in any ISO 8601 form compare by time, not by text (issue 15, items 1 and 4).
"""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.model import catalogue
from sync.model.stamps import StampError, normalize
from sync.store import Mirror
from tests.support.pages import write_page

NEW = "2026-01-01T01:02:00.000Z"
OLD = "2026-01-01T01:01:00.000Z"


def _resource(rtype: catalogue.ResourceType, stamp: str, related: int) -> dict[str, Any]:
    rels: dict[str, Any] = {}
    for rel in rtype.relationships:
        if rel.to_one:
            rels[rel.name] = {"data": {"type": rel.target, "id": str(related)}}
        else:
            rels[rel.name] = {"data": [{"type": rel.target, "id": str(related)}]}
    return {
        "id": "7",
        "type": rtype.name,
        "attributes": {"title": f"at {stamp}", "updated_at": stamp},
        "relationships": rels,
    }


def _links(mirror: Mirror, rtype: catalogue.ResourceType) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in rtype.relationships:
        if rel.to_one:
            out[rel.name] = mirror.table(rtype.name).get(7)[rel.column]  # type: ignore[index]
        else:
            owner, other = rel.link_columns(rtype.name)
            out[rel.name] = [
                r[0]
                for r in mirror.conn.execute(
                    f"SELECT [{other}] FROM [{rel.link_table(rtype.name)}] WHERE [{owner}] = 7"
                )
            ]
    return out


@pytest.mark.parametrize(
    "name", [n for n, t in catalogue.TYPES.items() if t.relationships and t.has_updated_at]
)
def test_older_copy_leaves_every_relationship_untouched(mirror: Mirror, name: str) -> None:
    rtype = catalogue.TYPES[name]
    mall = 1 if rtype.level == "mall" else None
    write_page(mirror, rtype, [_resource(rtype, NEW, 2)], mall_id=mall)
    before = _links(mirror, rtype)
    assert all(v in (2, [2]) for v in before.values()), before
    write_page(mirror, rtype, [_resource(rtype, OLD, 1)], mall_id=mall)
    assert _links(mirror, rtype) == before
    assert mirror.table(name).get(7)["title"] == f"at {NEW}"  # type: ignore[index]
    # An equal or newer copy still replaces them.
    write_page(mirror, rtype, [_resource(rtype, NEW, 3)], mall_id=mall)
    assert all(v in (3, [3]) for v in _links(mirror, rtype).values())


def test_older_copy_in_a_page_with_newer_rows_only_skips_its_own_links(mirror: Mirror) -> None:
    deals = catalogue.TYPES["deals"]
    a, b = _resource(deals, NEW, 2), _resource(deals, NEW, 2)
    b["id"] = "8"
    write_page(mirror, deals, [a, b])
    a2, b2 = _resource(deals, OLD, 1), _resource(deals, "2026-01-01T02:00:00.000Z", 5)
    b2["id"] = "8"
    write_page(mirror, deals, [a2, b2])
    rows = sorted(mirror.conn.execute("SELECT deals_id, images_id FROM deals_images"))
    assert rows == [(7, 2), (8, 5)]


@pytest.mark.parametrize(
    ("served", "stored"),
    [
        ("2026-01-01T01:02:00Z", "2026-01-01T01:02:00.000Z"),
        ("2026-01-01T02:02:00+01:00", "2026-01-01T01:02:00.000Z"),
        ("2026-01-01T01:02:00.123456Z", "2026-01-01T01:02:00.123Z"),
        ("2026-01-01T00:32:00-00:30", "2026-01-01T01:02:00.000Z"),
        ("2026-01-01T01:02:00.5Z", "2026-01-01T01:02:00.500Z"),
    ],
)
def test_absolute_stamps_are_stored_in_one_fixed_width_form(
    mirror: Mirror, served: str, stored: str
) -> None:
    deals = catalogue.TYPES["deals"]
    r = _resource(deals, served, 2)
    r["attributes"]["created_at"] = served
    r["attributes"]["display_at"] = "2026-01-01 10:00:00"  # relative: kept as served
    write_page(mirror, deals, [r])
    row = mirror.table("deals").get(7)
    assert row is not None
    assert (row["updated_at"], row["created_at"]) == (stored, stored)
    assert row["display_at"] == "2026-01-01 10:00:00"


def test_mixed_form_stamps_keep_the_newest_copy(mirror: Mirror) -> None:
    deals = catalogue.TYPES["deals"]
    # 01:30Z is newer than 02:00+01:00 (= 01:00Z), though it sorts lower as text.
    write_page(mirror, deals, [_resource(deals, "2026-01-01T01:30:00Z", 2)])
    write_page(mirror, deals, [_resource(deals, "2026-01-01T02:00:00+01:00", 1)])
    row = mirror.table("deals").get(7)
    assert row is not None
    assert row["updated_at"] == "2026-01-01T01:30:00.000Z"
    assert _links(mirror, deals)["images"] == [2]


def test_an_unreadable_stamp_refuses_that_row_only_and_says_so(mirror: Mirror) -> None:
    deals = catalogue.TYPES["deals"]
    good, bad = _resource(deals, NEW, 2), _resource(deals, "yesterday-ish", 1)
    bad["id"] = "8"
    with capture_logs() as logs:
        result = write_page(mirror, deals, [good, bad])
    assert result.rows == 1
    assert mirror.table("deals").get(8) is None
    assert mirror.table("deals").get(7) is not None
    errors = [e for e in logs if e["log_level"] == "error"]
    assert errors and errors[0]["id"] == 8 and "yesterday-ish" in errors[0]["problem"]


def test_normalize_refuses_what_is_not_a_stamp() -> None:
    for bad in ("", "soon", "2026-13-01T00:00:00Z", "2026-01-01T25:00:00Z"):
        with pytest.raises(StampError):
            normalize(bad)
