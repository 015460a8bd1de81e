"""sync.channel.webhooks: the requests `WebhookEndpoints` sends through its session, and what it reads back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from sync.channel.pages import Page
from sync.channel.paging import Paging, next_number
from sync.channel.webhooks import WebhookEndpoints
from sync.core.errors import BadResponseError


@dataclass
class _Answer:
    status: int
    body: bytes
    url: str


class _Session:
    """Just what the endpoints use of a `ChannelSession`: pages of two, one answer to send."""

    def __init__(self, hooks: int = 0, answer: bytes = b"{}") -> None:
        self.hooks = [{"id": str(i), "type": "webhooks"} for i in range(1, hooks + 1)]
        self.answer = answer
        self.pages: list[tuple[str, int, dict[str, str]]] = []
        self.sent: list[tuple[str, str, Any, bool]] = []

    async def get_page(self, path: str, number: int, params: dict[str, str]) -> Page:
        self.pages.append((path, number, params))
        rows = self.hooks[(number - 1) * 2 : number * 2]
        last = max(1, (len(self.hooks) + 1) // 2)
        return Page(rows, [], {}, number, last, None)

    def walk(self, fetch: Callable[[int], Awaitable[Page]]) -> AsyncIterator[Page]:
        return Paging(2).walk(fetch, 1, next_number)

    async def request(
        self, method: str, path: str, *, json: Any = None, once: bool = False
    ) -> _Answer:
        self.sent.append((method, path, json, once))
        return _Answer(201, self.answer, "http://u" + path)


async def test_list_all_reads_every_page_sorted_by_id() -> None:
    session = _Session(hooks=5)
    hooks = await WebhookEndpoints(session).list_all()  # type: ignore[arg-type]
    assert [h["id"] for h in hooks] == ["1", "2", "3", "4", "5"]
    assert session.pages == [("/webhooks", n, {"sort": "id"}) for n in (1, 2, 3)]


async def test_subscribe_is_sent_once_as_a_json_api_document() -> None:
    made = {"id": "9", "type": "webhooks", "attributes": {"topic": "deals"}}
    session = _Session(answer=orjson.dumps({"data": made}))
    assert await WebhookEndpoints(session).subscribe("http://me/webhooks/s", "deals") == made  # type: ignore[arg-type]
    assert session.sent == [
        (
            "POST",
            "/webhooks",
            {
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": "http://me/webhooks/s", "topic": "deals"},
                }
            },
            True,
        )
    ]


@pytest.mark.parametrize("body", [b"{}", b'{"data": null}', b'{"data": [1]}', b"[]"])
async def test_a_subscription_answer_without_a_resource_reads_as_empty(body: bytes) -> None:
    assert await WebhookEndpoints(_Session(answer=body)).subscribe("u", "t") == {}  # type: ignore[arg-type]


async def test_a_subscription_answer_that_is_not_json_is_a_bad_response() -> None:
    with pytest.raises(BadResponseError, match=r"not JSON .*\[201 http://u/webhooks\]"):
        await WebhookEndpoints(_Session(answer=b"<html>")).subscribe("u", "t")  # type: ignore[arg-type]


async def test_unsubscribe_deletes_by_id() -> None:
    session = _Session()
    await WebhookEndpoints(session).unsubscribe("42")  # type: ignore[arg-type]
    assert session.sent == [("DELETE", "/webhooks/42", None, False)]
