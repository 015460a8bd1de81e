"""sync.channel.pages: `to_page`'s message for each off-shape resource, `links.next`, and decode errors."""

from __future__ import annotations

from typing import Any

import pytest

from sync.channel.pages import decode, decode_listing, last_page_number, to_page
from sync.core.errors import BadResponseError

URL = "http://u/deals"


def _page(doc: Any, number: int = 1) -> Any:
    return to_page(doc, number, URL, 200, "1.4")


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("x", "has no id"),
        ({"type": "deals"}, "has no id"),
        ({"id": True}, "has an id that is neither a string nor a number"),
        ({"id": 1.5}, "has an id that is neither a string nor a number"),
        ({"id": "1", "attributes": []}, "has `attributes` that is not an object"),
        ({"id": "1", "meta": "m"}, "has `meta` that is not an object"),
        ({"id": "1", "relationships": {"tags": [1]}}, "has a relationship that is not an object"),
    ],
)
def test_each_off_shape_resource_is_named(item: Any, problem: str) -> None:
    with pytest.raises(BadResponseError) as info:
        _page({"data": [{"id": "0"}, item]})
    assert info.value.message == f"a resource in `data` {problem} [200 {URL}]"
    assert info.value.hint == "off-spec page; it will be retried on the next run"
    if isinstance(item, dict):  # (an included item that is no object is left out instead)
        with pytest.raises(BadResponseError, match=f"^a resource in `included` {problem}"):
            _page({"data": [], "included": [{"id": "0"}, item]})


def test_a_valid_page_keeps_what_is_usable_of_its_included_and_meta() -> None:
    page = _page(
        {
            "data": [{"id": "1", "relationships": {"mall": None}}, {"id": 2}],
            "included": [{"id": "9"}, "junk", 3],
            "meta": ["not", "an", "object"],
            "links": {"next": None},
        },
        number=4,
    )
    assert (page.rows, page.number, page.last, page.api_version) == (2, 4, 4, "1.4")
    assert page.included == [{"id": "9"}] and page.meta == {}
    assert not page.not_modified
    assert _page({"data": [], "included": {"id": "x"}}).included == []


def test_a_document_without_a_data_list_is_not_an_empty_page() -> None:
    for doc in ([], {"data": None}, {"data": {"id": "1"}}, {"errors": []}):
        with pytest.raises(BadResponseError) as info:
            _page(doc)
        assert (
            info.value.message == f"the upstream sent a document without a `data` list [200 {URL}]"
        )
        assert info.value.hint == "not a JSON:API collection; check base_url"


def test_links_next_says_whether_a_page_follows_when_last_is_missing() -> None:
    assert last_page_number({"links": {"next": None}}, 5) == 5
    assert last_page_number({"links": {"next": "http://u/deals?page[number]=6"}}, 5) == 6
    assert last_page_number({"links": {"last": "not a url ?page[number]=x", "next": None}}, 3) == 3
    assert last_page_number({"links": "http://u/x?page[number]=9"}, 2) == 1


def test_decode_names_a_body_that_is_not_json_and_decode_listing_falls_back_to_it() -> None:
    with pytest.raises(BadResponseError) as info:
        decode(b'{"data": [', URL, 200)
    assert info.value.message.startswith("the upstream sent a body that is not JSON (")
    assert info.value.status == 200
    with pytest.raises(BadResponseError, match="not JSON"):
        decode_listing(b"\xff", URL, 200)
    # a shape the typed decoder refuses is still parsed, as `decode` would
    assert decode_listing(b'{"data": {"id": "1"}}', URL, 200) == {"data": {"id": "1"}}
    doc = decode_listing(
        b'{"data": [{"id": "1", "links": {"self": "x"}}], "jsonapi": {"version": "1.0"}}',
        URL,
        200,
    )
    assert doc == {"data": [{"id": "1"}]}  # links and unread members left out
