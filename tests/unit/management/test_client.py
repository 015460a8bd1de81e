"""sync.management.client: the article and message updates refuse before sending, else send one PUT."""

from __future__ import annotations

from typing import Any

import pytest

from sync.core.errors import ConfigError, InvalidParametersError
from sync.core.sections import ManagementSettings
from sync.management.client import ManagementClient


class _Recording(ManagementClient):
    """A client whose one request is recorded and answered from `reply`, never sent."""

    def __init__(self, settings: ManagementSettings, reply: dict[str, Any]) -> None:
        super().__init__(settings)
        self.reply = reply
        self.sent: list[tuple[str, str, dict[str, str] | None, Any]] = []

    async def _send(self, method: str, path: str, **request: Any) -> Any:
        self.sent.append((method, path, request.get("params"), request.get("body")))
        return self.reply


def _settings(**tokens: str) -> ManagementSettings:
    return ManagementSettings(base_url="https://m.example", product="p", loyalty_club="c", **tokens)


async def test_an_article_update_is_one_put_with_dry_run_as_asked() -> None:
    client = _Recording(_settings(client_token="ct"), {"article": {"id": 5, "status": "draft"}})
    assert await client.update_article(5, {"status": "draft"}, dry_run=True) == {
        "id": 5,
        "status": "draft",
    }
    assert await client.update_article(5, {"status": "draft"}) == {"id": 5, "status": "draft"}
    assert client.sent == [
        (
            "PUT",
            "/v1/content/management/articles/5",
            {"dry_run": "true"},
            {"article": {"status": "draft"}},
        ),
        ("PUT", "/v1/content/management/articles/5", {}, {"article": {"status": "draft"}}),
    ]


async def test_a_forbidden_article_is_refused_and_nothing_sent() -> None:
    client = _Recording(_settings(client_token="ct"), {})
    with pytest.raises(InvalidParametersError) as info:
        await client.update_article(5, {"id": 5, "visible_in_list": None})
    assert info.value.url is None and info.value.status == 422
    assert set(info.value.details) == {"id", "visible_in_list"}
    assert str(info.value).startswith("Invalid parameters (refused before sending): id: ")
    assert client.sent == []


async def test_a_message_update_needs_the_user_token_and_encodes_the_service() -> None:
    client = _Recording(_settings(client_token="ct"), {})
    with pytest.raises(ConfigError, match="bearer_token is required for the message update"):
        await client.update_message("news", 1, {"name": "x"})
    user = _Recording(_settings(bearer_token="bt"), {"message": {"id": 1}})
    assert await user.update_message("a/b", 1, {"name": "x"}, archived="true") == {"id": 1}
    user.reply = {}  # an answer without the message: an empty one
    assert await user.update_message("a", 2, {"name": "x"}) == {}
    assert user.sent == [
        ("PUT", "/v1/messages/a%2Fb/1", {"archived": "true"}, {"message": {"name": "x"}}),
        ("PUT", "/v1/messages/a/2", {}, {"message": {"name": "x"}}),
    ]
    with pytest.raises(InvalidParametersError, match="shorten_urls"):
        await user.update_message("a", 3, {"shorten_urls": "yes"})
    assert len(user.sent) == 2
