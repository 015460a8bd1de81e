"""The backfill's missed-row pass: whether page-number paging can have skipped a row of a type.

Pages are sorted by id, so creates land at the end and updates move nothing: a row is skipped
only when a row before it leaves the listing mid-walk. The pass itself is the reconcile
(`sync.jobs.proving.reconcile`, ids and stamps listed again); it costs a listing of the whole type, so
it runs only on evidence that something left: what the walk saw (a short page, a `links.last`
that moved), a row the upstream says changed since the backfill started and the walk did not
read as it is (`sync.jobs.backfilling.changedsince`), or, for a mall's listing of several pages (whose rows
leave with no trace: a silent move), a page that no longer answers 304 to the ETag it was
served with (`moved`). A mall's listing is passed again until
a pass sees it hold still (`repair`); one that never does is reported unsettled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sync.channel.pages import Page
from sync.core.errors import UpstreamError
from sync.core.logs import get_logger
from sync.jobs.backfilling.changedsince import Listed, changed_since
from sync.jobs.fanout import bounded
from sync.jobs.proving.reconcile import ReconcileResult
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope
from sync.store import MirrorStore

#: Missed-row passes over one mall's listing at most: each pass that saw the listing change
#: (a row joined, left, was fetched or removed) may itself have skipped a row, so the pass is
#: repeated until one sees no change.
MALL_PASSES = 6
#: Whether page `number` of a scope still answers 304 to `If-None-Match` with its ETag.
Revalidate = Callable[[Scope, int, str], Awaitable[bool]]


class Reconciles(Protocol):
    """What the missed-row pass asks of the reconcile (`Reconciler`, or a test's fake)."""

    async def reconcile(self, scopes: Sequence[Scope]) -> ReconcileResult: ...


class Missed(Listed, Protocol):
    """What `MissedRows` asks of the upstream client (`ChannelClient`, or a test's fake):
    `changed_since`'s listings, and the deletions feed."""

    async def list_deletions(self, number: int, *, since: str | None = None) -> Page: ...


@dataclass
class Repair:
    """What the missed-row pass over one (type, mall) did; `settled`: a pass saw its listing
    hold still (always, for a top-level type: its pass runs once)."""

    fetched: int = 0
    removed: int = 0
    settled: bool = True


class MissedRows:
    """What the backfill's walk noticed, and the decision whether a type needs the pass."""

    def __init__(self, client: Missed, mirror: MirrorStore) -> None:
        self.client = client
        self.mirror = mirror
        self.log = get_logger("sync.backfill")
        # Types that got a page shorter than page[size] before `links.last`: rows went missing.
        self.short_pages: set[str] = set()
        # Types whose listing changed while walked (`links.last` moved, pages past it).
        self.shifted: set[str] = set()
        # Per mall-scoped type, its scopes walked over more than one page: key -> `links.last`.
        self.paged: dict[str, dict[str, int]] = {}
        # The ETag each page of those scopes was served with: (type, key) -> number -> tag.
        self.etags: dict[tuple[str, str], dict[int, str]] = {}

    def saw_scope(self, name: str, key: str, *, level: str, last: int) -> None:
        """Note one scope's `links.last` as its walk starts (or resumes, or reads past it)."""
        if level == "mall" and last > 1:
            scopes = self.paged.setdefault(name, {})
            scopes[key] = max(last, scopes.get(key, 0))

    def saw_etag(self, name: str, key: str, number: int, tag: str | None) -> None:
        """The ETag page `number` of a mall scope was served with (kept for `moved`)."""
        if tag:
            self.etags.setdefault((name, key), {})[number] = tag

    async def moved(
        self, rtype: ResourceType, scopes: Sequence[Scope], unchanged: Revalidate, limit: int
    ) -> list[Scope]:
        """The scopes of a mall-scoped type whose walk may have skipped a row unseen.

        A mall's listing is walked by page number like any other, and its rows leave it with
        no trace the walk or the feed can show: a row moved to another mall keeps its stamp
        and writes no feed entry, yet every later row of the listing moves one place earlier
        and one is skipped. A listing read in one page cannot skip a row; one of several
        pages skipped none if every page but the last still answers as it did (`unchanged`:
        `If-None-Match` with the ETag it was served with, a 304 with no body): a row that left
        an earlier page would have changed each page after it. A page served without an ETag
        (or read by an earlier, interrupted run) counts as changed."""
        if rtype.level != "mall":
            return []
        lasts = self.paged.get(rtype.name, {})
        walked = [s for s in scopes if s.key in lasts]

        out: list[Scope] = []

        async def check(scope: Scope) -> None:
            tags = self.etags.get((rtype.name, scope.key), {})
            for number in range(1, lasts[scope.key]):
                tag = tags.get(number)
                if tag is None or not await unchanged(scope, number, tag):
                    out.append(scope)
                    return

        await bounded(walked, limit, check)
        return out

    def saw_page(self, name: str, *, number: int, last: int, rows: int, walked_last: int) -> None:
        """Note what one page says about its listing (`walked_last`: the `links.last`
        the walk started from)."""
        if number < last and rows < self.client.paging.size:
            self.short_pages.add(name)
        if last != walked_last and rows:
            # `links.last` moved while the listing was walked: rows left it or joined it, and
            # with page numbers a row that left shifts every later row one place earlier (one
            # is skipped). The missed-row pass lists the scope again.
            self.shifted.add(name)

    async def needed(self, rtype: ResourceType, started_at: str) -> bool:
        """Whether the missed-row pass can find anything for this type.

        The pass is needed when the deletions feed shows deletions of this type since the
        backfill started, or when the mirror held rows of the type before it (some may be gone
        upstream), or when the walk saw a short page or a moving `links.last`, or when a row
        changed since the start. When the feed cannot be read, run the pass.
        """
        prefilled = (self.mirror.meta.get("backfill_prefilled") or "").split(",")
        if rtype.name in prefilled:
            return True
        if rtype.name in self.short_pages:
            self.log.info(
                "backfill.short_page", type=rtype.name, hint="running the missed-row pass"
            )
            return True
        if rtype.name in self.shifted:
            self.log.info(
                "backfill.listing_shifted", type=rtype.name, hint="running the missed-row pass"
            )
            return True
        try:
            async for page in self._deletions_since(started_at):
                for entry in page.resources:
                    raw = str((entry.get("attributes") or {}).get("resource_type", ""))
                    name = catalogue.normalize_type(raw)
                    if name is None:
                        # A type this client cannot map may be this one (`sync.jobs.incremental.feed`).
                        self.log.info(
                            "backfill.unknown_deletion_type",
                            type=rtype.name,
                            resource_type=raw[:60],
                            hint="running the missed-row pass",
                        )
                    if name in (rtype.name, None):
                        return True
            if await changed_since(self.client, self.mirror, rtype, started_at):
                self.log.info(
                    "backfill.changed_while_walked",
                    type=rtype.name,
                    hint="a row that changed may have left a listing mid-walk (a deal made "
                    "Private) and shifted later rows: running the missed-row pass",
                )
                return True
        except UpstreamError as exc:
            self.log.info("backfill.deletions_unreadable", type=rtype.name, error=str(exc))
            return True
        return False

    async def repair(self, reconciler: Reconciles, scopes: Sequence[Scope]) -> Repair:
        """The missed-row pass over one (type, mall): the reconcile of its scopes. A mall's
        listing is passed again until one pass sees it hold still: a row leaving it mid-pass
        (moved, made private: no feed entry, no new stamp) shifts later rows under the pass
        as under the walk, and shows only as a change the pass made. Still changing after
        `MALL_PASSES`, it is reported unsettled (`settled` False), never taken as complete."""
        out = Repair()
        mall = scopes[0].mall_id
        for _ in range(MALL_PASSES if mall is not None else 1):
            result = await reconciler.reconcile(scopes)
            out.fetched += result.fetched
            out.removed += result.removed
            if mall is None or result.mall_gone:
                return out
            if not (result.fetched or result.removed or result.joined or result.left):
                return out
        out.settled = False
        self.log.warning(
            "backfill.listing_unsettled",
            type=scopes[0].rtype.name,
            mall_id=mall,
            passes=MALL_PASSES,
            hint="the mall's listing changed under every missed-row pass: rows may be "
            "missing; run `ccsync reconcile` once it holds still",
        )
        return out

    async def _deletions_since(self, since: str) -> AsyncIterator[Page]:
        async for page in self.client.paging.walk_numbers(
            lambda n: self.client.list_deletions(n, since=since)
        ):
            yield page
