"""sync.daemon.http: webhook, /healthz, /metrics and other paths, over a fake receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from sync.core.metrics import Metrics
from sync.daemon.http import make_app
from sync.ingest.receiver import Answer, Delivery


class FakeReceiver:
    """What the app asks of `Receiver`: a size limit, `accept` and `reject`; it keeps what came."""

    def __init__(self, answer: Answer) -> None:
        self.limit = 64
        self.answer = answer
        self.deliveries: list[tuple[Delivery, bytes]] = []
        self.rejected: list[tuple[int, str, str]] = []

    async def accept(self, delivery: Delivery) -> Answer:
        body = b"".join([chunk async for chunk in delivery.body])
        self.deliveries.append((delivery, body))
        return self.answer

    def reject(self, status: int, reason: str, path: str, peer: str | None) -> Answer:
        self.rejected.append((status, reason, path))
        return Answer(status, reason)


async def _client(receiver: FakeReceiver, **kwargs: Any) -> AsyncIterator[TestClient[Any, Any]]:
    app = make_app(receiver, **kwargs)  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


@pytest.fixture
async def accepted() -> AsyncIterator[tuple[FakeReceiver, TestClient[Any, Any]]]:
    receiver = FakeReceiver(Answer(202))
    async for client in _client(receiver, health=lambda: {"status": "stale", "ready": True}):
        yield receiver, client


async def test_a_delivery_reaches_the_receiver_whole_and_its_answer_goes_back(
    accepted: tuple[FakeReceiver, TestClient[Any, Any]],
) -> None:
    receiver, client = accepted
    resp = await client.post(
        "/webhooks/s3cret", data=b'[{"id": "1"}]', headers={"Content-Type": "application/json"}
    )
    assert resp.status == 202 and await resp.read() == b""
    ((delivery, body),) = receiver.deliveries
    assert (delivery.secret, delivery.method, delivery.path) == (
        "s3cret",
        "POST",
        "/webhooks/s3cret",
    )
    assert delivery.content_type == "application/json" and delivery.content_length == 13
    assert body == b'[{"id": "1"}]' and delivery.peer == "127.0.0.1"


async def test_a_rejection_is_json_and_closes_the_connection_when_asked() -> None:
    receiver = FakeReceiver(Answer(413, "too large", {"limit": "64"}, close=True))
    async for client in _client(receiver):
        resp = await client.put("/webhooks/x", data=b"{}")
        assert resp.status == 413
        assert await resp.json() == {"error": "too large", "limit": "64"}
        assert resp.headers.get("Connection", "").lower() == "close"


async def test_healthz_is_503_unless_ok_and_other_paths_are_rejected_404(
    accepted: tuple[FakeReceiver, TestClient[Any, Any]],
) -> None:
    receiver, client = accepted
    resp = await client.get("/healthz")
    assert resp.status == 503 and await resp.json() == {"status": "stale", "ready": True}
    resp = await client.get("/nothing/here")
    assert resp.status == 404 and await resp.json() == {"error": "unknown path"}
    assert receiver.rejected == [(404, "unknown path", "/nothing/here")]
    resp = await client.get("/metrics")  # not enabled: a 404 naming why
    assert resp.status == 404 and await resp.json() == {"error": "metrics are not enabled"}
    assert receiver.deliveries == []


async def test_healthz_ok_without_a_report_and_metrics_in_the_exposition_format() -> None:
    metrics = Metrics()
    metrics.errors.labels(kind="Boom").inc()
    async for client in _client(FakeReceiver(Answer(202)), metrics=metrics):
        resp = await client.get("/healthz")
        assert resp.status == 200 and await resp.json() == {"status": "ok"}
        resp = await client.get("/metrics")
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        assert 'sync_errors_total{kind="Boom"} 1.0' in await resp.text()
