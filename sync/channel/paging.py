"""Paging: the one rule every listing walk stops by, and the page size the upstream really serves.

The spec gives `page[size]` a range of 1 through 100 with the upper bound "subject to change",
and `links.last` as an address the upstream computes. Neither is taken on trust:

- **The served size is learned.** A page shorter than asked that is not the last (its
  `links.last` names a later page) shows the upstream's bound: that length is remembered
  (`Paging.served`) and asked for from then on, and it sizes `filter[id]` batches.
- **A walk ends on evidence.** It goes on after every *full* page (as many rows as the upstream
  serves), even past `links.last` (an upstream whose `links.last` is short would otherwise end a
  walk with rows unread: the next page is asked and found empty). It ends at an empty page, or a
  page shorter than the served size that `links.last` agrees is the last. A short page never
  proves that rows are gone: that is for `filter[id]` over every page (`sync.jobs.evidence`).
- **A page past the end may be refused.** The page after one at or past `links.last` (or
  whose `links.next` is null) proves nothing when it answers 404 or 400: the walk ends there,
  as at an empty page (Django REST framework answers 404 "Invalid page."). A page promised by
  `links.last` that answers so is a failure of that listing, never read as "gone".
- **A walk makes progress or ends.** Every page a walk reads must bring something it does not
  hold: a non-empty page served again whole (the same rows with the same stamps as a page
  this walk already read: the upstream ignored `page[number]`, or a filter compares otherwise
  than the walk assumed) ends the walk with `NoProgressError`, naming the page, instead of
  asking the same rows again at the whole request budget. Callers read it as a failed listing
  (nothing inferred gone from what was not reached); the polls' keyed walk ends there with
  what it read and reports why (`sync.jobs.incremental.walks`). A page-number walk's requests are then at
  most the distinct pages the listing serves, plus the one past the end.
- **A refused size is retried smaller.** A 400 that names `page[size]` drops the size asked to
  the spec's default of 25 (then halves it) and remembers it.

`Paging.more` is the stop rule and `Paging.walk` the one loop built on it (dlt's paginator: one
object holds the state and the rule, one loop asks the pages). Every listing walks through them:
`ChannelClient.walk` (page-number listings: collections, `filter[id]`, deletions, webhooks,
relationship routes), the polls' keyed walk (`sync.jobs.incremental.poll.walk_by_stamp`, whose next position
is a stamp), and the pages past `links.last` of the walks that first ask the pages it names side
by side (`sync.jobs.backfilling.backfill`, `sync.jobs.malls.mallroutes`). The membership fast path
(`sync.jobs.malls.mallincludes`) is no walk: it asks chosen pages of `/malls` (the busiest malls'
first) and those `links.last` reveals, not the next page until a stop.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, TypeVar

from sync.core.errors import NoProgressError, UpstreamError
from sync.core.logs import get_logger

#: The spec's bound on `page[size]` (subject to change upstream).
SPEC_MAX = 100
#: The spec's default `page[size]`.
SPEC_DEFAULT = 25
#: What a page past the end of a listing may answer besides an empty page (Django's paginator:
#: 404 "Invalid page."; others refuse the number with a 400).
PAST_END = (400, 404)
#: How often a promised page that answered 404 or 400 is asked again (`reask`).
REASKS = 3
#: Where the mirror keeps what was learned (`_sync_meta`), shown by `ccsync status`.
META_KEY = "upstream_paging"

_log = get_logger("sync.channel")


class Paged(Protocol):
    """What the stop rule reads of a page: a client's `Page`, or a backfill's page as staged
    (`sync.pipeline.batches.StagedPage`, which holds rows, not resources)."""

    @property
    def number(self) -> int: ...

    @property
    def last(self) -> int: ...  # page[number] of `links.last`

    @property
    def rows(self) -> int: ...  # resources in `data`

    @property
    def not_modified(self) -> bool: ...

    def digest(self) -> int: ...  # what the page holds: ids and stamps (the progress rule)


#: Where a walk is: a page number, or what a keyed walk asks by (`sync.jobs.incremental.poll`).
Position = TypeVar("Position")
#: The pages a walk yields.
PageT = TypeVar("PageT", bound=Paged)


def next_number(number: int, page: Paged) -> int:
    """The position after page `number` of a page-number walk."""
    return number + 1


class Paging:
    """The page size asked, the size the upstream proved it serves, and the stop rule."""

    def __init__(self, asked: int, *, on_change: Callable[[Paging], None] | None = None) -> None:
        #: What a listing asks for as `page[size]` (lowered after a 400 that names it).
        self.asked = max(1, min(int(asked), SPEC_MAX))
        #: The largest page the upstream has been seen to cap at (None: no cap seen yet).
        self.served: int | None = None
        self.on_change = on_change

    @property
    def size(self) -> int:
        """The rows a full page holds: what is asked, or less where the upstream caps pages."""
        return self.asked if self.served is None else min(self.asked, self.served)

    def more(self, page: Paged, asked: int | None = None) -> bool:
        """Whether a walk must ask the page after `page` (asked with `page[size]=asked`)."""
        if page.not_modified:
            return False
        return self.more_after(page.number, page.rows, page.last, asked)

    def more_after(self, number: int, rows: int, last: int, asked: int | None = None) -> bool:
        """`more` for page `number` holding `rows` rows, whose `links.last` named `last`."""
        n = rows
        if n == 0:
            return False
        full = min(asked or self.asked, self.served or asked or self.asked)
        if n >= full:
            return True  # a full page: ask the next, whatever `links.last` says
        if number < last:
            # Short, yet the upstream says more pages follow: it serves fewer than asked.
            self.learn(n)
            return True
        return False

    async def walk(
        self,
        fetch: Callable[[Position], Awaitable[PageT]],
        start: Position,
        step: Callable[[Position, PageT], Position],
        *,
        asked: int | None = None,
        promised: bool = True,
        promised_by: Position | None = None,
        held: set[int] | None = None,
    ) -> AsyncIterator[PageT]:
        """The one paging loop: `fetch(start)`, then `fetch(step(position, page))` after every
        page the stop rule (`more`, pages asked with `page[size]=asked`) says is not the last.
        Each page is yielded before the rule is asked, so a caller that stops early (a page
        out of order, `sync.jobs.incremental.poll.OutOfOrder`) asks nothing more.

        A page past what the upstream promised (the one after a page at or past its
        `links.last`, or whose `links.next` is null; `promised=False`: already the first one
        asked) that answers 404 or 400 is the end of the listing, as an empty page is (Django's
        paginator answers "Invalid page." there). A page the upstream promised that answers so
        is a failure, raised, unless the page before it (`promised_by` for `start`: the page
        read before the walk whose `links.last` promised it), asked again, now ends before it
        (the listing shrank while walked) or the page, asked again, is served (`reask`).

        A non-empty page whose rows and stamps equal a page this walk already read raises
        `NoProgressError` before it is yielded (the progress rule, module docstring); `held`
        carries the digests across several calls that make up one walk (`sync.jobs.incremental.walks`)."""
        position = start
        earlier = promised_by
        seen: set[int] = set() if held is None else held
        while True:
            try:
                page = await fetch(position)
            except UpstreamError as exc:
                if exc.status not in PAST_END:
                    raise
                if not promised:
                    _log.debug("upstream.past_end", status=exc.status, url=exc.url)
                    return
                if earlier is None:
                    raise
                got = await reask(
                    functools.partial(fetch, position),
                    functools.partial(_promises_more, fetch, earlier),
                    exc,
                )
                if got is None:
                    return
                page = got
            if page.rows:
                digest = page.digest()
                if digest in seen:
                    _log.debug("upstream.walk_no_progress", page=page.number, rows=page.rows)
                    raise NoProgressError(
                        f"page {page.number} served again {page.rows} rows this walk had "
                        "already read: the walk ended there instead of asking them again",
                        hint="the upstream ignored the page or filter asked; nothing is "
                        "inferred from what the walk did not reach, and health names it",
                    )
                seen.add(digest)
            yield page
            if not self.more(page, asked):
                return
            earlier = position
            promised = page.number < page.last
            position = step(position, page)

    def walk_numbers(
        self, fetch: Callable[[int], Awaitable[PageT]], start: int = 1, *, promised: bool = True
    ) -> AsyncIterator[PageT]:
        """`walk` by page number, as every listing is walked: pages from `start` (`promised=False`:
        page `start` is past the `links.last` already read, so a 404 there is the end;
        promised, page `start - 1` is the one whose promise is asked again when it answers 404)."""
        by = start - 1 if start > 1 else None
        return self.walk(fetch, start, next_number, promised=promised, promised_by=by)

    def learn(self, served: int) -> None:
        """The upstream served `served` rows on a page that was not its last."""
        if served <= 0 or (self.served is not None and served >= self.served):
            return
        before = self.served
        self.served = served
        _log.warning(
            "upstream.page_bound_learned",
            asked=self.asked,
            served=served,
            before=before,
            hint="the upstream caps page[size] below what was asked; walks use its bound",
        )
        if self.on_change is not None:
            self.on_change(self)

    def refused(self) -> bool:
        """A 400 named `page[size]`: ask smaller. False when there is nothing smaller to ask."""
        if self.asked <= 1:
            return False
        before = self.asked
        self.asked = SPEC_DEFAULT if self.asked > SPEC_DEFAULT else max(1, self.asked // 2)
        _log.warning(
            "upstream.page_size_refused",
            asked=before,
            now=self.asked,
            hint="the upstream refused page[size]; asking smaller pages from now on",
        )
        if self.on_change is not None:
            self.on_change(self)
        return True

    # -- kept in the mirror (`_sync_meta`), so a restart does not learn it again ---------------

    def keep(self, get: Callable[[str], str | None], put: Callable[[str, str], None]) -> None:
        """Restore what an earlier run learned from `get(META_KEY)`, and `put` every change."""
        self.load(get(META_KEY))
        self.on_change = lambda p: put(META_KEY, p.dump())

    def dump(self) -> str:
        return f"{self.asked}:{self.served or ''}"

    def load(self, text: str | None) -> None:
        """Restore what an earlier run learned (never raises on a damaged value)."""
        if not text:
            return
        asked, _, served = text.partition(":")
        if asked.isdigit() and 1 <= int(asked) < self.asked:
            self.asked = int(asked)
        if served.isdigit() and int(served) > 0:
            self.served = int(served)


async def _promises_more(fetch: Callable[[Position], Awaitable[PageT]], position: Position) -> bool:
    """Whether the page at `position`, asked again, still names a later page."""
    page = await fetch(position)
    return page.number < page.last


async def reask(
    fetch: Callable[[], Awaitable[PageT]],
    still_promised: Callable[[], Awaitable[bool]],
    exc: UpstreamError,
) -> PageT | None:
    """A page the upstream promised answered 404 or 400 (`exc`): the page, or None when the
    listing shrank while walked.

    Paging by number is no snapshot: rows that leave the listing between two requests can take
    a promised page away, and rows that arrive (a change committed late) bring it back before
    the next request. So the promise is asked again (`still_promised`, e.g. page 1's
    `links.last`): withdrawn, the listing shrank (None; the caller's missed-row pass or the
    next walk reads it again); still made, the page is asked again. After `REASKS` rounds the
    failure is the listing's and `exc` (or the latest refusal) is raised: a promised page is
    never read as "gone"."""
    for _ in range(REASKS):
        if not await still_promised():
            _log.info("upstream.listing_shrank", status=exc.status, url=exc.url)
            return None
        try:
            return await fetch()
        except UpstreamError as again:
            if again.status not in PAST_END:
                raise
            exc = again
    raise exc
