"""`sync.jobs.incremental.answered`: a poll page answers the update notices received before it
was asked for (they leave the queue, no `filter[id]` of their own); a notice received while it
was asked for, or a copy the mirror did not take, is still the worker's to fetch."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.answered import answer_notices, held_as_served
from sync.jobs.incremental.poll import Poller
from sync.jobs.incremental.queueworker import QueueWorker
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.model.notices import WebhookNotice
from sync.model.scopes import Scope
from sync.model.stamps import iso_ms
from sync.store import Mirror
from sync.store.queue import ChangeQueue
from sync.store.watch import StorageWatch
from tests.support.jobfakes import FakeClient, page, res, stamp, table

ARTICLES = catalogue.TYPES["articles"]


def _updates(*rids: int) -> list[WebhookNotice]:
    return [WebhookNotice("update", "articles", "articles", rid) for rid in rids]


def _received_earlier(queue: ChangeQueue) -> None:
    """The notices waiting were received a second ago (not within the poll's millisecond)."""
    queue.conn.execute("UPDATE _sync_queue SET received_at = ?", (iso_ms(time.time() - 1),))
    queue.conn.commit()


class Notified(FakeClient):
    """Notices of `during` arrive while a listing is being asked for (the request in flight)."""

    def __init__(self, queue: ChangeQueue, during: Sequence[int]) -> None:
        super().__init__()
        self.queue, self.during = queue, list(during)

    async def list_page(self, request: Scope | Listing, number: int, **kw: Any) -> Page:
        if self.during:
            self.queue.enqueue(_updates(*self.during))
            self.during = []
        return await super().list_page(request, number, **kw)


async def _poll_then_drain(client: FakeClient, mirror: Mirror, queue: ChangeQueue) -> list[int]:
    """A poll of the articles, then the queue worker: the ids it asked by `filter[id]`."""
    mirror.cursors.set("articles", "", stamp(20))
    poller = Poller(client, mirror, page_size=100, overlap=0.0, notices=queue)  # type: ignore[arg-type]
    await poller.poll_scope(Scope(ARTICLES))
    worker = QueueWorker(
        mirror,
        queue,
        Evidence(client, mirror),
        [ARTICLES],
        members=None,  # type: ignore[arg-type]
        poller=poller,
        concurrency=1,
        faults=TypeFaults(),
        storage=StorageWatch(Path(mirror.conn.execute("PRAGMA database_list").fetchone()[2])),
    )
    client.asked.clear()
    await worker.drain_type("articles")
    assert queue.depth() == 0
    return sorted(i for kind, (_, wanted) in client.asked if kind == "ids" for i in wanted)


async def test_a_notice_received_before_the_page_was_asked_for_costs_no_request(
    mirror: Mirror,
) -> None:
    """The poll served rows 1 and 2 at their new version: their notices are answered; row 3
    (not changed since the cursor, so not in the listing) is still fetched."""
    table(mirror, "articles", [(1, stamp(10)), (2, stamp(10)), (3, stamp(10))])
    queue = ChangeQueue(mirror.conn)
    queue.enqueue(_updates(1, 2, 3))
    _received_earlier(queue)
    client = FakeClient()
    client.serve(Scope(ARTICLES), [res(1, "articles", stamp(30)), res(2, "articles", stamp(31))])
    assert await _poll_then_drain(client, mirror, queue) == [3]


async def test_a_notice_received_while_the_page_was_asked_for_is_still_fetched(
    mirror: Mirror,
) -> None:
    """Row 1 notified before and again during the request, row 2 only during it: the page may
    have been read before their change, so both are fetched; row 3's notice is answered."""
    table(mirror, "articles", [(1, stamp(10)), (2, stamp(10)), (3, stamp(10))])
    queue = ChangeQueue(mirror.conn)
    queue.enqueue(_updates(1, 3))
    _received_earlier(queue)
    client = Notified(queue, during=[1, 2])
    client.serve(Scope(ARTICLES), [res(i, "articles", stamp(30 + i)) for i in (1, 2, 3)])
    assert await _poll_then_drain(client, mirror, queue) == [1, 2]


def test_only_rows_the_mirror_holds_at_the_version_served_or_newer_count() -> None:
    served = page(
        [
            res(1, "articles", stamp(30)),
            res(2, "articles", stamp(30)),  # held older: the copy was refused
            res(3, "articles", stamp(30)),  # not held at all
            res(4, "articles", None),  # no stamp: nothing to compare
            res(5, "articles", stamp(30)),
        ]
    )
    held = {1: stamp(30), 2: stamp(10), 4: stamp(40), 5: stamp(50)}
    assert held_as_served(served, held) == [1, 5]


def test_a_page_that_does_not_say_when_it_was_asked_answers_nothing(mirror: Mirror) -> None:
    queue = ChangeQueue(mirror.conn)
    queue.enqueue(_updates(1))
    served = page([res(1, "articles", stamp(30))])
    held = {1: stamp(30)}
    assert answer_notices(queue, "articles", served, held) == 0
    assert answer_notices(None, "articles", served, held) == 0
    assert queue.depth() == 1
    later = Page(served.resources, [], {}, 1, 1, None, asked_at="2999-01-01T00:00:00.000Z")
    assert answer_notices(queue, "articles", later, held) == 1
    assert queue.depth() == 0
