"""Webhook subscriptions of the emulator and the batched delivery of change notices.

Changes to a topic (a JSON:API type name) are collected for a short window and posted as one
`{data: [...]}` body per subscription. A delivery that does not get a 2xx (or times out, or
cannot connect) is retried; after `ATTEMPTS` failures the subscription is removed, as the spec
says. Loss, duplication and reordering faults are applied here. Delivery runs in its own task
and never blocks request handling.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from sync.emulator.faults import Faults
from sync.emulator.hard import Hard

ATTEMPTS = 5


@dataclass
class Subscription:
    id: int
    account_id: int
    callback_url: str
    topic: str
    pending: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0


class Dispatcher:
    """Holds subscriptions and delivers batched notices to them."""

    def __init__(
        self,
        faults: Faults,
        *,
        window: float = 0.05,
        retry_interval: float = 0.2,
        max_batch: int = 100,
        timeout: float = 5.0,
        hard: Hard | None = None,
    ) -> None:
        self.faults = faults
        self.hard = hard if hard is not None else Hard()
        self.window = window
        self.retry_interval = retry_interval
        self.max_batch = max_batch
        self.timeout = timeout
        self.subs: dict[int, Subscription] = {}
        self.next_id = 1
        self.delivered = 0
        self.auto_unsubscribed = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def subscribe(self, account_id: int, callback_url: str, topic: str) -> Subscription:
        sub = Subscription(self.next_id, account_id, callback_url, topic)
        self.next_id += 1
        self.subs[sub.id] = sub
        return sub

    def unsubscribe(self, sub_id: int) -> bool:
        return self.subs.pop(sub_id, None) is not None

    def notice(self, kind: str, type_name: str, rid: int, deletion: str | None) -> None:
        """A change happened: queue a notice for every subscription to its topic."""
        item: dict[str, Any] = {
            "type": "updates" if kind == "update" else "deletions",
            "attributes": {"resource_type": type_name, "resource_id": rid},
        }
        if deletion is not None:
            item = {"type": "deletions", "id": deletion, "attributes": item["attributes"]}
        for sub in self.subs.values():
            if sub.topic == type_name:
                if self.faults.roll(self.faults.webhook_loss_rate, "webhook_lost"):
                    continue
                sub.pending.append(item)
                if self.faults.roll(self.faults.webhook_duplicate_rate, "webhook_duplicated"):
                    sub.pending.append(item)
        self._wake.set()

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.window)  # let close changes join one batch
            await asyncio.gather(*(self._deliver(s) for s in list(self.subs.values()) if s.pending))
            if any(s.pending for s in self.subs.values()):
                self._wake.set()

    def burst(self, type_name: str, ids: list[int], count: int) -> int:
        """`count` update notices of `type_name`, its `ids` in turn, queued for every
        subscription to it at once (`Hard.huge_notice_batches` delivers them as one body);
        how many subscriptions got them."""
        subs = [s for s in self.subs.values() if s.topic == type_name]
        for sub in subs:
            sub.pending.extend(
                {
                    "type": "updates",
                    "attributes": {"resource_type": type_name, "resource_id": ids[i % len(ids)]},
                }
                for i in range(count)
            )
        self._wake.set()
        return len(subs)

    async def _deliver(self, sub: Subscription) -> None:
        size = len(sub.pending) if self.hard.huge_notice_batches else self.max_batch
        batch = sub.pending[:size]
        del sub.pending[:size]
        if self.faults.webhook_reorder:
            self.faults.rng.shuffle(batch)
            self.faults.injected["webhook_reordered"] = (
                self.faults.injected.get("webhook_reordered", 0) + 1
            )
        body = orjson.dumps({"data": batch})
        while sub.id in self.subs:
            ok = False
            assert self._session is not None
            try:
                async with self._session.post(
                    sub.callback_url, data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    ok = 200 <= resp.status < 300
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            if ok:
                sub.failures = 0
                self.delivered += len(batch)
                return
            sub.failures += 1
            if sub.failures >= ATTEMPTS:
                self.subs.pop(sub.id, None)  # the spec's automatic unsubscription
                self.auto_unsubscribed += 1
                return
            await asyncio.sleep(self.retry_interval)
