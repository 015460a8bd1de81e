"""sync.management.press: the press release list's paging, its sort refusal, and `confirm_absent`'s pages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from sync.core.errors import BadResponseError
from sync.core.sections import ManagementSettings
from sync.management import press
from sync.management.press import PRESS_ORDER, PRESS_PATH, PressReleaseList, _refuses_sort
from sync.management.walk import Walk


@dataclass
class _Answer:
    """What the list reads of a transport's response."""

    status: int
    body: bytes


class _Served(PressReleaseList):
    """A press release list answered by `serve(params)`, recording what was asked."""

    def __init__(self, base_url: str, serve: Callable[[dict[str, str]], _Answer]) -> None:
        super().__init__(
            ManagementSettings(
                base_url=base_url, product="p", loyalty_club="c", bearer_token="bt", per_page=2
            )
        )
        self.serve = serve
        self.asked: list[dict[str, str]] = []

    async def _exchange(self, method: str, path: str, **request: Any) -> tuple[Any, str]:
        assert (method, path, request.get("locale")) == ("GET", PRESS_PATH, "en")
        params = dict(request.get("params") or {})
        self.asked.append(params)
        return self.serve(params), self.settings.base_url + path


def _page(ids: list[int], next_page: int | None, **info: Any) -> _Answer:
    doc = {
        "press_releases": [{"id": i} for i in ids] + ["junk", {"id": "7"}],
        "pagination_info": {"next_page": next_page, **info},
    }
    return _Answer(200, orjson.dumps(doc))


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    press.forget_sort_outcomes()
    yield
    press.forget_sort_outcomes()


def test_a_refusal_is_a_4xx_naming_the_order_or_any_400_422_to_page_one() -> None:
    assert _refuses_sort(_Answer(403, b"sort_by[] not allowed"), first_page=False)
    assert _refuses_sort(_Answer(400, b"{}"), first_page=True)
    assert _refuses_sort(_Answer(422, b"{}"), first_page=True)
    assert not _refuses_sort(_Answer(422, b"{}"), first_page=False)
    assert not _refuses_sort(_Answer(401, b"{}"), first_page=True)
    assert not _refuses_sort(_Answer(500, b"sort_by"), first_page=True)


async def test_pages_follow_next_page_and_stop_at_the_last_items_kept_only_with_int_ids() -> None:
    pages = {"1": _page([1, 2], 3), "3": _page([5], 4, is_last_page=True)}
    client = _Served("http://press-a", lambda p: pages[p["page_no"]])
    walk = Walk()
    got = [[r["id"] for r in page] async for page in client.press_releases("en", walk)]
    assert got == [[1, 2], [5]]
    assert client.asked == [
        {"page_no": "1", "per_page": "2", **PRESS_ORDER},
        {"page_no": "3", "per_page": "2", **PRESS_ORDER},
    ]
    assert press.sort_outcome("http://press-a") is True
    assert walk.proves_absent(6) and walk.boundary_of(4) == 4


async def test_an_empty_page_ends_the_list_and_a_shapeless_answer_is_bad() -> None:
    client = _Served("http://press-b", lambda p: _page([], 2))
    assert [page async for page in client.press_releases("en")] == [[]]
    broken = _Served("http://press-c", lambda p: _Answer(200, b'{"press_releases": []}'))
    with pytest.raises(BadResponseError, match="without press_releases/pagination_info"):
        [page async for page in broken.press_releases("en")]


async def test_a_known_refusal_skips_the_order_from_the_first_request() -> None:
    press._remember_sort("http://press-d", False, 400)
    client = _Served("http://press-d", lambda p: _page([2, 1], None))
    walk = Walk()
    assert [[r["id"] for r in page] async for page in client.press_releases("en", walk)] == [[2, 1]]
    assert client.asked == [{"page_no": "1", "per_page": "2"}]
    assert not walk.by_id


async def test_confirm_absent_asks_one_straddling_page_per_boundary() -> None:
    walk = Walk()
    walk.add([1, 2, 3], offset=0, first=True, last=False)
    walk.add([9, 10, 11], offset=3, first=False, last=False)
    walk.add([20], offset=6, first=False, last=True)
    served = {("2", "2"): _page([3, 4, 9], 3), ("2", "4"): _page([9, 11, 20], None)}
    client = _Served("http://press-e", lambda p: served[(p["page_no"], p["per_page"])])
    pages = [page async for page in client.confirm_absent("en", walk, [5, 6, 15, 1])]
    # offset 3: size 2 (3 % 2), page 2; offset 6: size 4 (6 % 4), page 2
    assert [p["per_page"] for p in client.asked] == ["2", "4"]
    assert [[r["id"] for r in page] for page in pages] == [[3, 4, 9], [9, 11, 20]]
    assert walk.proves_absent(5) and walk.proves_absent(15) and not walk.proves_absent(4)


async def test_confirm_absent_asks_nothing_of_an_unsorted_walk() -> None:
    walk = Walk()
    walk.unsorted()
    client = _Served("http://press-f", lambda p: pytest.fail("nothing should be asked"))
    assert [page async for page in client.confirm_absent("en", walk, [5])] == []
