"""sync.pipeline.linkage: to-one linkage as `<name>_id` columns, to-many as link lists."""

from __future__ import annotations

from typing import Any

from sync.model import catalogue
from sync.pipeline.linkage import Links, take_linkage


def _take(type_name: str, rels: dict[str, Any]) -> tuple[dict[str, Any], Links]:
    columns: dict[str, Any] = {}
    links: Links = {}
    take_linkage(catalogue.TYPES[type_name], 5, rels, columns, links)
    return columns, links


def test_to_one_becomes_a_column_null_when_the_linkage_is_null() -> None:
    assert _take("events", {"mall": {"data": {"type": "malls", "id": "3"}}})[0] == {"mall_id": 3}
    assert _take("events", {"mall": {"data": None}})[0] == {"mall_id": None}
    assert _take("events", {"mall": {"data": {"id": "x"}}})[0] == {"mall_id": None}
    # Absent `data` (or no such relationship): the upstream said nothing, nothing is set.
    assert _take("events", {"mall": {"links": {"related": "/x"}}}) == ({}, {})
    assert _take("events", {}) == ({}, {})


def test_to_many_lists_the_integer_ids_and_an_empty_list_says_gone() -> None:
    rels = {
        "images": {"data": [{"id": "1"}, {"id": "no"}, "junk", {"id": 2}]},
        "tags": {"data": []},
        "groups": {"data": None},  # not a list: no linkage taken
        "unknown": {"data": [{"id": "9"}]},  # not a relationship of the type
    }
    columns, links = _take("events", rels)
    assert columns == {}
    assert links == {"images": [(5, [1, 2])], "tags": [(5, [])]}


def test_links_of_several_owners_accumulate_per_relationship() -> None:
    links: Links = {"images": [(1, [10])]}
    take_linkage(catalogue.TYPES["deals"], 2, {"images": {"data": [{"id": "11"}]}}, {}, links)
    assert links == {"images": [(1, [10]), (2, [11])]}
