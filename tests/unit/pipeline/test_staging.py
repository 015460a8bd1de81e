"""sync.pipeline.staging: resources staged as rows (columns, mall ids, meta, samples)."""

from __future__ import annotations

import json

import pytest

from sync.core.errors import BadResponseError
from sync.model import catalogue
from sync.pipeline.staging import safe_name, stage, stage_listing, stage_resources

V = "2026-01-01T00:00:00.000Z"


def test_safe_names_exclude_quotes_brackets_and_nul() -> None:
    assert safe_name("title") and safe_name("a b.c")
    assert not any(safe_name(n) for n in ("", 'a"b', "a[0]", "x]", "nul\x00"))


def test_stage_keys_rows_by_integer_id_with_columns_sorted_and_case_folded() -> None:
    resources = [
        {"id": "2", "attributes": {"title": "b", "Title": "B", "zeta": {"k": 1}}},
        {"id": "one", "attributes": {"title": "skipped"}},  # no integer id: left out
        {"id": "1", "attributes": {"title": None, "bad[col]": 1, "ID": 5}, "meta": {"rank": 3}},
    ]
    b = stage(catalogue.TYPES["deals"], resources, None)
    # `Title` cannot sit beside `title` (SQLite names ignore case); `ID` clashes with the key.
    assert b.columns == ("meta_rank", "title", "zeta")
    assert b.ids == [2, 1]
    assert b.rows == [(2, None, "b", '{"k":1}'), (1, 3, None, None)]
    assert b.samples == {"title": "b", "zeta": '{"k":1}', "meta_rank": 3}
    assert b.versions is None and b.refused == []


def test_a_mall_scoped_type_carries_its_mall_and_included_rows_carry_versions() -> None:
    store = {"id": "5", "type": "stores", "attributes": {"name": "s"}}
    tag = {"id": "7", "type": "tags", "attributes": {"name": "t"}}
    image = {"id": "8", "type": "images", "attributes": {"updated_at": V}}
    junk = [{"id": "9", "type": "nonsense"}, {"id": "9"}]
    listed, *included = stage_resources(
        catalogue.TYPES["stores"], [store], [tag, image, *junk], mall_id=4, skip=("tags",)
    )
    assert listed.columns == ("mall_id", "name") and listed.rows == [(5, 4, "s")]
    assert [(b.type, b.ids, b.versions) for b in included] == [("images", [8], [V])]
    top = stage_resources(catalogue.TYPES["deals"], [{"id": "1"}], [tag], mall_id=4)
    assert top[0].columns == () and top[0].rows == [(1,)]  # a top-level type: no mall column
    assert top[1].versions is not None and isinstance(top[1].versions[0], bytes)


def test_stage_listing_reads_the_page_bounds_and_refuses_a_non_collection() -> None:
    body = json.dumps(
        {
            "data": [{"id": "1", "type": "deals", "attributes": {"updated_at": V}}],
            "links": {"last": "https://up/deals?page[number]=4"},
            "meta": {"scripts": []},
        }
    ).encode()
    page = stage_listing("deals", body, number=2, url="u", status=200, mall_id=None)
    assert (page.number, page.last, page.resources, page.scripts) == (2, 4, 1, [])
    assert page.newest() == V
    with pytest.raises(BadResponseError) as caught:
        stage_listing(
            "deals", b'{"data": 5}', number=1, url="https://up/deals", status=200, mall_id=None
        )
    assert "without a `data` list" in str(caught.value) and caught.value.url == "https://up/deals"
