"""The `/webhooks` routes: subscribe, list one's subscriptions, unsubscribe.

Each account sees and removes only its own subscriptions. Holding them and delivering the
batched notices is `sync.emulator.webhooks`'s.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from sync.emulator.app import EmulatorApp
from sync.emulator.responses import JSONAPI, SCRIPTS, error
from sync.emulator.webhooks import Subscription


class WebhookRoutes:
    """Handlers of the `/webhooks` routes over `emu`."""

    def __init__(self, emu: EmulatorApp) -> None:
        self.emu = emu

    def _resource(self, sub: Subscription) -> dict[str, Any]:
        return {
            "id": str(sub.id),
            "type": "webhooks",
            "links": {"self": f"{self.emu.base}/webhooks/{sub.id}"},
            "attributes": {"callback_url": sub.callback_url, "topic": sub.topic},
        }

    async def create_webhook(self, request: web.Request) -> web.StreamResponse:
        emu = self.emu
        account = emu.auth(request)
        attrs = await emu.attributes(request)
        url, topic = attrs.get("callback_url"), attrs.get("topic")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return error(422, "Unprocessable Entity", "callback_url must be an http(s) URL")
        if not isinstance(topic, str) or topic not in emu.data.by_type:
            return error(422, "Unprocessable Entity", f"unknown topic {topic!r}")
        sub = emu.dispatcher.subscribe(account.id, url, topic)
        body = {"data": self._resource(sub), "meta": {"scripts": SCRIPTS}}
        return web.Response(status=201, body=orjson.dumps(body), headers={"Content-Type": JSONAPI})

    async def list_webhooks(self, request: web.Request) -> web.StreamResponse:
        emu = self.emu
        account = emu.auth(request)
        q = emu.parse("webhooks", request)
        mine = [s for s in emu.dispatcher.subs.values() if s.account_id == account.id]
        start = (q.number - 1) * q.size
        body = {
            "data": [self._resource(s) for s in mine[start : start + q.size]],
            "links": emu.page_links(request, len(mine), q.size),
            "meta": {"scripts": SCRIPTS},
        }
        return web.Response(body=orjson.dumps(body), headers={"Content-Type": JSONAPI})

    async def delete_webhook(self, request: web.Request) -> web.StreamResponse:
        account = self.emu.auth(request)
        raw = request.match_info["id"]
        dispatcher = self.emu.dispatcher
        sub = dispatcher.subs.get(int(raw)) if raw.isdigit() else None
        if sub is None or sub.account_id != account.id:
            return error(404, "Not Found", f"no webhook {raw}")
        dispatcher.unsubscribe(sub.id)
        return web.Response(status=204)
