"""The subscription endpoints: list, create and delete the account's webhooks.

Apart from the listings because a subscription is written, not mirrored: `subscribe` is the one
request the client never repeats blind (`once`), since a timeout or a 5xx may follow a
subscription that was made. What to subscribe and when is `sync.ingest.subscriptions`'s; the
notices that arrive are `sync.ingest`'s receiver's.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from sync.channel.pages import Page, decode
from sync.channel.session import ChannelSession


class WebhookEndpoints:
    """GET, POST and DELETE /webhooks, through the session the client holds them over
    (`ChannelClient.webhooks`)."""

    def __init__(self, session: ChannelSession) -> None:
        self.session = session

    async def list_all(self) -> list[dict[str, Any]]:
        """Every subscription of this account, all pages."""

        def fetch(number: int) -> Awaitable[Page]:
            return self.session.get_page("/webhooks", number, {"sort": "id"})

        return [r async for page in self.session.walk(fetch) for r in page.resources]

    async def subscribe(self, callback_url: str, topic: str) -> dict[str, Any]:
        """POST /webhooks; returns the subscription resource ({} if the body has none)."""
        body = {
            "data": {
                "type": "webhooks",
                "attributes": {"callback_url": callback_url, "topic": topic},
            }
        }
        # Not idempotent: a timeout or a 5xx may follow a subscription that was made, and a
        # blind retry would make a second one (`Subscriptions.ensure` looks first).
        resp = await self.session.request("POST", "/webhooks", json=body, once=True)
        doc = decode(resp.body, resp.url, resp.status)
        data = doc.get("data") if isinstance(doc, dict) else None
        return data if isinstance(data, dict) else {}

    async def unsubscribe(self, webhook_id: str) -> None:
        """DELETE /webhooks/{id} (the spec does not show the path; this is the JSON:API one)."""
        await self.session.request("DELETE", f"/webhooks/{webhook_id}")
