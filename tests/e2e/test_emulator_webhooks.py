"""The emulator's webhooks over real HTTP: subscriptions, batched delivery, the automatic
unsubscription after five failures, and the loss, duplication and reordering faults
(`sync.emulator.subscriptions`, `sync.emulator.webhooks`)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from sync.emulator import Emulator
from tests.support.emulator_client import Signed, valid
from tests.support.waiting import eventually

# -- webhooks ------------------------------------------------------------------------------------


class Receiver:
    def __init__(self, status: int = 204) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.Response(status=self.status)


async def _receiver(status: int = 204) -> tuple[Receiver, web.AppRunner]:
    rec = Receiver(status)
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.url = f"http://127.0.0.1:{port}/hook"
    return rec, runner


async def _subscribe(api: Signed, url: str, topic: str) -> Any:
    body = {"data": {"type": "webhooks", "attributes": {"callback_url": url, "topic": topic}}}
    return await api.send("POST", "/webhooks", body)


async def test_webhook_subscription_and_batched_delivery(api: Signed, emulator: Emulator) -> None:
    rec, runner = await _receiver()
    try:
        status, _, doc = await api.send(
            "POST",
            "/webhooks",
            {
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": rec.url, "topic": "deals"},
                }
            },
        )
        assert status == 201
        valid(doc)
        hook = doc["data"]["id"]
        _, _, listing = await api.get("/webhooks")
        assert [h["id"] for h in listing["data"]] == [hook]
        ids = emulator.ids("deals")[:3]
        for d in ids:
            emulator.update("deals", d)
        gone = emulator.delete("deals", ids[2])
        await eventually(lambda: sum(len(b["data"]) for b in rec.bodies) >= 4)
        items = [i for b in rec.bodies for i in b["data"]]
        assert len(rec.bodies) < 4  # batched
        assert {
            "type": "updates",
            "attributes": {"resource_type": "deals", "resource_id": int(ids[0])},
        } in items
        assert {
            "type": "deletions",
            "id": gone,
            "attributes": {"resource_type": "deals", "resource_id": int(ids[2])},
        } in items
        status, _, _ = await api.send("DELETE", f"/webhooks/{hook}")
        assert status == 204 and emulator.webhooks() == []
        assert (
            await api.send(
                "POST",
                "/webhooks",
                {
                    "data": {
                        "type": "webhooks",
                        "attributes": {"callback_url": "ftp://x", "topic": "deals"},
                    }
                },
            )
        )[0] == 422
    finally:
        await runner.cleanup()


async def test_failing_receiver_is_unsubscribed_after_five_attempts(
    api: Signed, emulator: Emulator
) -> None:
    rec, runner = await _receiver(status=500)
    try:
        await _subscribe(api, rec.url, "deals")
        emulator.update("deals", emulator.ids("deals")[0])
        await eventually(lambda: not emulator.webhooks())
        assert len(rec.bodies) == 5 and emulator.dispatcher.auto_unsubscribed == 1
    finally:
        await runner.cleanup()


async def test_webhook_loss_duplication_reorder(api: Signed, emulator: Emulator) -> None:
    rec, runner = await _receiver()
    try:
        await _subscribe(api, rec.url, "events")
        emulator.faults.webhook_loss_rate = 1.0
        emulator.update("events", emulator.ids("events")[0])
        await asyncio.sleep(0.2)
        assert rec.bodies == [] and emulator.faults.injected["webhook_lost"] == 1
        emulator.faults.webhook_loss_rate = 0
        emulator.faults.webhook_duplicate_rate = 1.0
        emulator.faults.webhook_reorder = True
        emulator.update("events", emulator.ids("events")[1])
        await eventually(lambda: bool(rec.bodies))
        assert (
            len(rec.bodies[0]["data"]) == 2 and rec.bodies[0]["data"][0] == rec.bodies[0]["data"][1]
        )
        assert emulator.faults.injected["webhook_reordered"] >= 1
    finally:
        await runner.cleanup()
