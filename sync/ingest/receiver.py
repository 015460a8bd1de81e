"""The webhook receiver: verifying a delivery of change notices and committing it to the queue.

One call, `Receiver.accept`, takes a delivery (what the HTTP layer read off the request: the
path's secret, method, content type, length, the body as it streams in) and answers with the
status to send. The HTTP route (`sync.daemon.http`) only translates a request into a
`Delivery` and the `Answer` into a response, so everything below is testable without a server.

`POST /webhooks/<secret>` only: the secret path segment is the callback's only guard (the upstream
does not sign notices), compared in constant time and never logged. A valid body is committed to
the durable queue and answered 202 at once, before any fetching, so the upstream never
unsubscribes us for being slow. Everything else is rejected with the status that names the
problem (404 path, 405 method, 408 body too slow, 413 too large, 415 content type, 400
off-spec), logged, and answered as soon as it is known: a declared length over the limit before
a byte of the body is read, a body that is no batch at the chunk that shows it (the parser's
rules: `sync.model.notices`), chunked or not. A rejection closes the connection: what the sender
still writes is dropped for at most `sync.daemon.http.LINGER` seconds, never parsed or kept. While the mirror cannot take writes (disk full, read-only, locked too
long: `sync.store.watch`), or when the queue write itself fails so, a delivery is answered 503 with
the reason: it was not committed, so the upstream must retry it rather than count it done.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field

import orjson

from sync.core.config import WebhookSettings
from sync.core.errors import StorageFault
from sync.core.logs import get_logger
from sync.core.metrics import Metrics
from sync.model.notices import BatchReader, NoticeError, WebhookNotice
from sync.store.faults import storage_errors, storage_fault
from sync.store.seamparts import ChangeQueuePart
from sync.store.watch import StorageWatch

CONTENT_TYPES = frozenset({"application/json", "application/vnd.api+json"})
MASKED_PATH = "/webhooks/***"
#: The body is read in chunks of this many bytes, each checked against the size limit.
CHUNK = 65536
MIB = 1 << 20
#: Notices committed to the queue in one transaction while a body streams in: memory holds at
#: most this many, whatever the size of the batch.
COMMIT_EVERY = 2000


@dataclass(frozen=True)
class Delivery:
    """One request to the callback, as the HTTP layer hands it over; `body` is read lazily."""

    secret: str
    method: str
    content_type: str
    content_length: int | None
    body: AsyncIterable[bytes]
    path: str
    peer: str | None = None


@dataclass(frozen=True)
class Answer:
    """The status to answer; a rejection carries its reason (sent as `{"error": reason}` plus
    `extra`), and `close` asks for the connection to be closed after it."""

    status: int
    reason: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    close: bool = False

    def body(self) -> bytes | None:
        if self.reason is None:
            return None
        return orjson.dumps({"error": self.reason, **self.extra})


ACCEPTED = Answer(202)


@dataclass
class _Tally:
    """What one delivery has committed so far."""

    delivery: int
    items: int = 0
    updates: int = 0
    deletions: int = 0
    queued: int = 0

    def count(self, notices: list[WebhookNotice]) -> None:
        self.items += len(notices)
        self.updates += sum(n.kind == "update" for n in notices)
        self.deletions = self.items - self.updates


class Receiver:
    """Verifies deliveries and commits their notices to `queue`; see the module docstring.
    `on_enqueued` runs after a commit that queued something (the queue worker's `wake`)."""

    def __init__(
        self,
        settings: WebhookSettings,
        queue: ChangeQueuePart,
        *,
        on_enqueued: Callable[[], None] | None = None,
        metrics: Metrics | None = None,
        storage: StorageWatch | None = None,
    ) -> None:
        self.settings = settings
        self.queue = queue
        self.on_enqueued = on_enqueued
        self.metrics = metrics
        self.storage = storage
        self.secret = settings.secret.get_secret_value().encode() if settings.secret else None
        self.limit = settings.max_body_bytes
        self.log = get_logger("sync.webhooks")

    def reject(
        self,
        status: int,
        reason: str,
        path: str,
        peer: str | None,
        extra: dict[str, str] | None = None,
    ) -> Answer:
        """A logged and counted rejection; the secret in a callback path is never logged."""
        shown = MASKED_PATH if path.startswith("/webhooks/") else path
        self.log.warning("webhook.rejected", status=status, reason=reason, path=shown, peer=peer)
        if self.metrics is not None:
            self.metrics.notices.labels(outcome=f"rejected_{status}").inc()
        # Closed after the answer: the body may be unread, and a connection kept alive would
        # read it to its end (aiohttp drains what a handler left) before the next request.
        return Answer(status, reason, extra or {}, close=True)

    async def accept(self, delivery: Delivery) -> Answer:
        """Verify `delivery` and commit its valid notices to the queue; the answer to send."""
        d = delivery
        if self.secret is None or not hmac.compare_digest(d.secret.encode(), self.secret):
            return self.reject(404, "unknown path", d.path, d.peer)
        if d.method != "POST":
            return self.reject(405, "only POST is accepted", d.path, d.peer)
        if d.content_type not in CONTENT_TYPES:
            given = d.content_type or "none"
            reason = f"content type must be application/json, not {given}"
            return self.reject(415, reason, d.path, d.peer)
        too_large = f"body over {self.limit} bytes ([webhooks] max_body_bytes)"
        if d.content_length is not None and d.content_length > self.limit:
            return self.reject(413, too_large, d.path, d.peer)
        reader = BatchReader()
        pending: list[WebhookNotice] = []
        tally = _Tally(delivery=self.queue.open_delivery())  # its own lane in the queue
        received = 0
        timeout = self.settings.body_timeout
        try:
            # A deadline on the average rate, not an idle one: `body_timeout` for each MiB begun,
            # so a batch of any size has the time its size needs, while a sender dribbling a
            # byte at a time still cannot hold a handler (and its connection) for ever.
            async with asyncio.timeout(timeout) as deadline:
                start = asyncio.get_running_loop().time()
                async for chunk in d.body:
                    received += len(chunk)
                    if received > self.limit:
                        return self._end(413, too_large, d, tally)
                    deadline.reschedule(start + timeout * (1 + received // MIB))
                    pending += reader.feed(chunk)
                    if len(pending) >= COMMIT_EVERY:
                        fault = self._commit(pending, tally)
                        if fault is not None:
                            return self._unavailable(fault, d, tally)
                        pending = []
                pending += reader.close()
        except TimeoutError:
            slow = f"body not received within {timeout:g} s a MiB"
            return self._end(408, slow, d, tally)
        except NoticeError as exc:
            return self._end(400, str(exc), d, tally)
        fault = self._commit(pending, tally)
        if fault is not None:
            return self._unavailable(fault, d, tally)
        self._woken(tally)
        for problem in reader.problems:  # the valid items are kept; each invalid one is reported
            self.log.warning("webhook.item_invalid", problem=problem)
        if reader.invalid > len(reader.problems):
            self.log.warning(
                "webhook.items_invalid_more", count=reader.invalid - len(reader.problems)
            )
        if self.metrics is not None and reader.invalid:
            self.metrics.notice_items_invalid.inc(reader.invalid)
        if self.metrics is not None:
            self.metrics.notices.labels(outcome="accepted").inc()
        # At debug: the queue worker's `worker.summary` is the batches' line at info.
        self.log.debug(
            "webhook.accepted",
            items=tally.items,
            updates=tally.updates,
            deletions=tally.deletions,
            ignored_unknown_types=tally.items - tally.queued,
            invalid_items=reader.invalid,
            queue_depth=self.queue.depth(),
        )
        return ACCEPTED

    def _commit(self, notices: list[WebhookNotice], tally: _Tally) -> StorageFault | None:
        """Commit `notices` to the queue (one transaction), counted in `tally`; the storage
        fault that kept them out, if any."""
        fault = self.storage.fault if self.storage is not None else None
        if fault is None:
            try:
                tally.queued += self.queue.enqueue(notices, tally.delivery)
            except storage_errors() as exc:
                fault = self._fault(exc)
        if fault is None:
            tally.count(notices)
        return fault

    def _unavailable(self, fault: StorageFault, d: Delivery, tally: _Tally) -> Answer:
        """503: the delivery was not (wholly) committed, so the upstream must retry it."""
        reason = f"the mirror cannot take writes now: {fault}"
        return self._end(503, reason, d, tally, {"reason": fault.reason})

    def _end(
        self,
        status: int,
        reason: str,
        d: Delivery,
        tally: _Tally,
        extra: dict[str, str] | None = None,
    ) -> Answer:
        """A rejection once part of the body may be committed: those notices are hints as
        good as any (the queue coalesces the upstream's retry of them), so the worker is woken."""
        self._woken(tally)
        return self.reject(status, reason, d.path, d.peer, extra)

    def _woken(self, tally: _Tally) -> None:
        if self.on_enqueued is not None and tally.queued:
            self.on_enqueued()

    def _fault(self, exc: Exception) -> StorageFault:
        """The storage fault a failed queue write is, reported; anything else is raised."""
        fault = (
            self.storage.report(exc)
            if self.storage is not None
            else storage_fault(exc, "the mirror", then="then the upstream's retry lands")
        )
        if fault is None:
            raise exc
        return fault
