"""sync.pipeline.pagepool: a pool of no workers stages here, with the writer's memo and the URL."""

from __future__ import annotations

import json

import pytest

from sync.core.errors import BadResponseError
from sync.pipeline.pagepool import PagePool
from sync.pipeline.seen import Seen

V = "2026-01-01T00:00:00.000Z"
BODY = json.dumps(
    {
        "data": [{"id": "1", "type": "deals", "attributes": {"updated_at": V}}],
        "included": [
            {"id": "10", "type": "images", "attributes": {"updated_at": V}},
            {"id": "11", "type": "images", "attributes": {"updated_at": V}},
        ],
    }
).encode()


async def test_without_workers_pages_are_staged_here_less_what_the_memo_holds() -> None:
    async with PagePool(0) as pool:
        assert not pool.running
        first = await pool.stage("deals", BODY, number=1, url="u", status=200, mall_id=None)
        assert [b.ids for b in first.batches] == [[1], [10, 11]]
        pool.memo = Seen(10)
        pool.memo.add("images", [10], [V])
        second = await pool.stage("deals", BODY, number=2, url="u", status=200, mall_id=None)
        assert [b.ids for b in second.batches] == [[1], [11]]
        assert pool.staged_here == 2 and second.ticket == 0
        pool.written(second)  # staged here: no worker to tell, nothing happens


async def test_a_refused_page_raises_with_the_url_and_status_of_its_request() -> None:
    async with PagePool(0) as pool:
        with pytest.raises(BadResponseError) as caught:
            await pool.stage(
                "deals", b"[1, 2]", number=1, url="https://up/deals", status=203, mall_id=None
            )
    assert caught.value.url == "https://up/deals" and caught.value.status == 203
    assert pool.staged_here == 1
