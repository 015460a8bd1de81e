"""`sync.jobs.backfilling.missedrows`: what the walk noticed (short pages, a moving `links.last`, mall
pages whose ETag still holds), when the pass is needed, and how often a mall's pass repeats."""

from __future__ import annotations

from collections.abc import Sequence

from structlog.testing import capture_logs

from sync.core.errors import RetriesExhaustedError
from sync.jobs.backfilling.missedrows import MALL_PASSES, MissedRows
from sync.jobs.proving.reconcile import ReconcileResult
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, deletion, res, stamp, table

STORES = catalogue.TYPES["stores"]
ARTICLES = catalogue.TYPES["articles"]
START = stamp(0)


def test_a_short_page_before_the_last_and_a_moving_last_are_noted(mirror: Mirror) -> None:
    missed = MissedRows(FakeClient(size=10), mirror)
    missed.saw_page("deals", number=1, last=3, rows=10, walked_last=3)
    missed.saw_page("deals", number=3, last=3, rows=2, walked_last=3)  # the last: short is fine
    assert missed.short_pages == set() and missed.shifted == set()
    missed.saw_page("deals", number=2, last=3, rows=9, walked_last=3)
    missed.saw_page("events", number=4, last=4, rows=5, walked_last=3)
    missed.saw_page(
        "stores", number=5, last=4, rows=0, walked_last=3
    )  # an empty page: nothing moved
    assert missed.short_pages == {"deals"}
    assert missed.shifted == {"events"}


def test_only_mall_scopes_of_several_pages_are_kept(mirror: Mirror) -> None:
    missed = MissedRows(FakeClient(), mirror)
    missed.saw_scope("deals", "", level="top", last=9)
    missed.saw_scope("stores", "mall=1", level="mall", last=1)
    missed.saw_scope("stores", "mall=2", level="mall", last=3)
    missed.saw_scope("stores", "mall=2", level="mall", last=2)  # a resumed walk: the largest kept
    missed.saw_etag("stores", "mall=2", 1, 'W/"a"')
    missed.saw_etag("stores", "mall=2", 2, None)
    assert missed.paged == {"stores": {"mall=2": 3}}
    assert missed.etags == {("stores", "mall=2"): {1: 'W/"a"'}}


async def test_a_mall_scope_moved_unless_every_page_but_the_last_still_answers_304(
    mirror: Mirror,
) -> None:
    missed = MissedRows(FakeClient(), mirror)
    one, two, three, four = (Scope(STORES, m) for m in (1, 2, 3, 4))
    for scope in (two, three, four):
        missed.saw_scope("stores", scope.key, level="mall", last=3)
        missed.saw_etag("stores", scope.key, 1, f"{scope.mall_id}-1")
        missed.saw_etag("stores", scope.key, 2, f"{scope.mall_id}-2")
    missed.etags[("stores", four.key)].pop(2)  # read by an earlier run: no tag kept
    asked: list[tuple[int | None, int, str]] = []

    async def unchanged(scope: Scope, number: int, tag: str) -> bool:
        asked.append((scope.mall_id, number, tag))
        return tag != "3-2"

    moved = await missed.moved(STORES, [one, two, three, four], unchanged, 1)
    assert [s.mall_id for s in moved] == [3, 4]
    # Mall 1 (one page) is never asked; the last page of each is never asked either.
    assert asked == [(2, 1, "2-1"), (2, 2, "2-2"), (3, 1, "3-1"), (3, 2, "3-2"), (4, 1, "4-1")]
    assert await missed.moved(ARTICLES, [Scope(ARTICLES)], unchanged, 1) == []


async def test_the_pass_is_needed_on_evidence_only(mirror: Mirror) -> None:
    table(mirror, "articles", [(1, stamp(5))])
    client = FakeClient()
    client.serve(Scope(ARTICLES), [res(1, "articles", stamp(5))])
    missed = MissedRows(client, mirror)
    assert await missed.needed(ARTICLES, START) is False
    assert ("deletions", (1, START)) in client.asked
    # A deletion of another type since the start: still no evidence for articles.
    client.deletions = [deletion(1, "events", 3, stamp(9))]
    assert await missed.needed(ARTICLES, START) is False
    client.deletions.append(deletion(2, "Mystery", 4, stamp(9)))  # unknown: may be this one
    with capture_logs() as logs:
        assert await missed.needed(ARTICLES, START) is True
    assert [e["event"] for e in logs] == ["backfill.unknown_deletion_type"]


async def test_a_prefilled_type_or_an_unreadable_feed_needs_the_pass(mirror: Mirror) -> None:
    mirror.conn.execute(
        "INSERT INTO _sync_meta (key, value) VALUES ('backfill_prefilled', 'deals,articles')"
    )
    mirror.conn.commit()

    class Down(FakeClient):
        async def list_deletions(self, number: int, **_: object) -> None:  # type: ignore[override]
            raise RetriesExhaustedError("the feed answered 503", status=503)

    missed = MissedRows(Down(), mirror)  # type: ignore[arg-type]
    assert await missed.needed(ARTICLES, START) is True  # prefilled: no request
    events = catalogue.TYPES["events"]
    with capture_logs() as logs:
        assert await missed.needed(events, START) is True
    assert [e["event"] for e in logs] == ["backfill.deletions_unreadable"]


class Passes:
    """A reconciler whose passes answer the results given, in turn."""

    def __init__(self, results: Sequence[ReconcileResult]) -> None:
        self.results = list(results)
        self.calls = 0

    async def reconcile(self, scopes: Sequence[Scope]) -> ReconcileResult:
        self.calls += 1
        return self.results.pop(0) if self.results else ReconcileResult(fetched=1)


async def test_a_mall_listing_is_passed_again_until_it_holds_still(mirror: Mirror) -> None:
    missed = MissedRows(FakeClient(), mirror)
    passes = Passes(
        [ReconcileResult(fetched=2), ReconcileResult(left=1, removed=1), ReconcileResult()]
    )
    out = await missed.repair(passes, [Scope(STORES, 5)])
    assert (passes.calls, out.fetched, out.removed, out.settled) == (3, 2, 1, True)
    # A top-level type: one pass, whatever it did.
    top = Passes([ReconcileResult(fetched=4)])
    assert (await missed.repair(top, [Scope(ARTICLES)])).fetched == 4
    assert top.calls == 1
    # The mall went: no more passes.
    gone = Passes([ReconcileResult(fetched=1, mall_gone=True)])
    assert (await missed.repair(gone, [Scope(STORES, 5)])).settled is True
    assert gone.calls == 1


async def test_a_listing_that_never_holds_still_is_reported_unsettled(mirror: Mirror) -> None:
    missed = MissedRows(FakeClient(), mirror)
    passes = Passes([])
    with capture_logs() as logs:
        out = await missed.repair(passes, [Scope(STORES, 5)])
    assert (passes.calls, out.fetched, out.settled) == (MALL_PASSES, MALL_PASSES, False)
    assert [(e["event"], e["mall_id"], e["passes"]) for e in logs] == [
        ("backfill.listing_unsettled", 5, MALL_PASSES)
    ]
