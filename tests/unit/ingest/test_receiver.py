"""sync.ingest.receiver: `Receiver.accept`'s answers for each kind of delivery, without a server."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import orjson
import pytest
from pydantic import SecretStr

from sync.core.config import WebhookSettings
from sync.core.errors import StorageFault
from sync.ingest.receiver import Answer, Delivery, Receiver
from sync.model.notices import WebhookNotice
from sync.store.queue import ChangeQueue

SECRET = "u1-receiver-secret-0123456789"


def _settings() -> WebhookSettings:
    return WebhookSettings(secret=SecretStr(SECRET), max_body_bytes=1024)


def _body(*ids: int, rtype: str = "deals") -> bytes:
    items = [
        {"type": "updates", "attributes": {"resource_type": rtype, "resource_id": i}} for i in ids
    ]
    return orjson.dumps({"data": items})


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def _delivery(
    *parts: bytes,
    method: str = "POST",
    content_type: str = "application/json",
    length: int | None = None,
) -> Delivery:
    return Delivery(
        SECRET, method, content_type, length, _chunks(*parts), f"/webhooks/{SECRET}", "10.0.0.1"
    )


@pytest.fixture
def queue(tmp_path: Path) -> ChangeQueue:
    return ChangeQueue(sqlite3.connect(tmp_path / "q.db", isolation_level=None))


async def test_method_content_type_and_declared_length_are_checked_before_the_body(
    queue: ChangeQueue,
) -> None:
    receiver = Receiver(_settings(), queue)
    answers = [
        await receiver.accept(_delivery(_body(1), method="PUT")),
        await receiver.accept(_delivery(_body(1), content_type="text/plain")),
        await receiver.accept(_delivery(_body(1), content_type="")),
        await receiver.accept(_delivery(_body(1), length=1025)),
    ]
    assert [(a.status, a.reason) for a in answers] == [
        (405, "only POST is accepted"),
        (415, "content type must be application/json, not text/plain"),
        (415, "content type must be application/json, not none"),
        (413, "body over 1024 bytes ([webhooks] max_body_bytes)"),
    ]
    assert queue.depth() == 0
    ok = await receiver.accept(_delivery(_body(1), content_type="application/vnd.api+json"))
    assert ok.status == 202 and queue.depth() == 1


async def test_a_body_growing_past_the_limit_is_refused_however_it_is_chunked(
    queue: ChangeQueue,
) -> None:
    receiver = Receiver(_settings(), queue)
    body = _body(*range(1, 40))
    assert len(body) > 1024
    answer = await receiver.accept(_delivery(body[:1000], body[1000:]))
    assert (answer.status, answer.close) == (413, True)  # the rest of the body is never read
    assert queue.depth() == 0


async def test_the_worker_is_woken_only_when_something_was_queued(queue: ChangeQueue) -> None:
    woken: list[int] = []
    receiver = Receiver(_settings(), queue, on_enqueued=lambda: woken.append(queue.depth()))
    assert (await receiver.accept(_delivery(_body(5, rtype="spaceships")))).status == 202
    assert woken == [] and queue.depth() == 0  # an unknown type: acknowledged, ignored
    assert (await receiver.accept(_delivery(_body(5, 6)))).status == 202
    assert woken == [2]  # after the commit, once
    bad = await receiver.accept(_delivery(b'{"data": [1]}'))
    assert (bad.status, bad.reason) == (400, "data[0] must be an object")


class _Degraded:
    """A storage watch that reports the mirror full."""

    fault = StorageFault("disk_full", "/m.db", "database or disk is full", "free space")

    def report(self, exc: BaseException) -> StorageFault | None:
        return self.fault


class _FullQueue(ChangeQueue):
    def enqueue(self, notices: Sequence[WebhookNotice], delivery: int | None = None) -> int:
        raise sqlite3.OperationalError("database or disk is full")


async def test_a_delivery_the_mirror_cannot_take_is_answered_503_with_the_reason(
    queue: ChangeQueue, tmp_path: Path
) -> None:
    woken: list[int] = []
    degraded = Receiver(
        _settings(), queue, storage=_Degraded(), on_enqueued=lambda: woken.append(1)
    )  # type: ignore[arg-type]
    answer = await degraded.accept(_delivery(_body(1)))
    assert answer.status == 503 and answer.extra == {"reason": "disk_full"}
    assert orjson.loads(answer.body() or b"") == {
        "error": "the mirror cannot take writes now: /m.db: database or disk is full; free space",
        "reason": "disk_full",
    }
    assert queue.depth() == 0 and woken == []
    full = _FullQueue(sqlite3.connect(tmp_path / "full.db", isolation_level=None))
    failed = await Receiver(_settings(), full).accept(_delivery(_body(1)))
    assert failed.status == 503 and failed.extra == {"reason": "disk_full"}
    assert failed.reason is not None and "database or disk is full" in failed.reason


def test_an_answer_without_a_reason_has_no_body() -> None:
    assert Answer(202).body() is None
    assert orjson.loads(Answer(404, "unknown path", {"x": "y"}).body() or b"") == {
        "error": "unknown path",
        "x": "y",
    }
