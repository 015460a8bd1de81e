"""Incremental polls: changed rows by `filter[updated_at][gte]`, deletions from the deletions feed.

Both walk a listing sorted by a timestamp *by key*, not by page number: each request asks for
page 1 of `filter[<stamp>][gte]=<largest stamp seen so far>`. A row updated while the poll runs
moves to the end of the order, where the poll still finds it; with page numbers it would shift
every later row one place and one of them would be skipped for good. Rows sharing the boundary
stamp are read twice (harmless: writes are idempotent upserts), and a run of equal stamps longer
than a page is walked by page number at that one stamp. So a poll of k changes issues about
ceil(k/100) + 1 requests per scope, whatever the size of the mirror.

The cursor is the largest stamp the upstream served (its own clock), and the next poll starts
`overlap` seconds before it, so rows committed upstream slightly out of stamp order are not lost.

The spec documents `sort` on some routes only (not on /articles, /contacts, /ifeatures,
/job-listings, /mall-messages, /deletions), so the walk by key is taken only where the upstream
profile (`sync.channel.profile`) found the order honoured, and it checks every page: a page out
of stamp order (the upstream ignores `sort`, which would make the key jump past unread rows)
stops it, re-probes the route, and that poll goes on *unsorted*: every page of
`filter[updated_at][gte]=<cursor>` by page number in id order, the cursor advanced only after
the whole walk (and not at all when the listing changed under it, so the next poll reads it
again). Where `filter[updated_at]` is not honoured either, the unsorted walk reads the whole
listing and writes only the rows stamped since the cursor.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.channel.paging import Paging, next_number
from sync.channel.profile import (
    DELETIONS_ROUTE,
    Profiler,
    RouteProfile,
    UpstreamProfile,
    Verdict,
    contradicted,
    route_key,
)
from sync.core.errors import NotFoundError
from sync.core.logs import get_logger
from sync.jobs.fanout import bounded
from sync.jobs.feed import FeedEntries
from sync.jobs.fetch import confirm_mall_gone, parse_id
from sync.jobs.freshness import OnLag, changed_lags, upstream_now
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms, normalize_or_none, shift
from sync.pipeline.staging import stage_resources
from sync.store import Mirror

DELETIONS = catalogue.DELETIONS_FEED


class OutOfOrder(Exception):
    """A page of a walk by key came back out of stamp order: the upstream ignores `sort`."""


@dataclass
class PollResult:
    """What one poll of one scope did."""

    requests: int = 0
    rows: int = 0
    cursor: str | None = None


async def walk_by_stamp(
    fetch: Callable[[str, int], Awaitable[Page]],
    since: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
) -> PollResult:
    """Walk a listing sorted by `stamp_field` from `since` by key; see the module docstring.

    The loop and its stop rule are the one every listing shares (`Paging.walk`, `Paging.more`
    with `page[size]=asked`): a page shorter than asked ends the walk only when it is shorter
    than the upstream serves. Its position is (anchor stamp, page number)."""
    result = PollResult()

    def step(at: tuple[str, int], page: Page) -> tuple[str, int]:
        anchor, number = at
        newest = result.cursor
        if newest is None or newest <= anchor:
            return anchor, number + 1  # a run of equal stamps longer than a page: by number
        return newest, 1

    async for page in paging.walk(lambda at: fetch(*at), (since, 1), step, asked=asked):
        result.requests += 1
        if page.resources:
            # Normalised: the cursor is compared as text and sent back as a filter value; a
            # row with an unreadable stamp moves no cursor (its write logs the problem).
            stamps = [
                s
                for r in page.resources
                if (s := normalize_or_none((r.get("attributes") or {}).get(stamp_field)))
            ]
            if any(a > b for a, b in pairwise(stamps)):
                # Written anyway (the rows are real); the key must not jump on this page.
                on_page(page)
                raise OutOfOrder(f"rows out of {stamp_field} order on page {page.number}")
            on_page(page)
            result.rows += len(page.resources)
            top = max(stamps) if stamps else None
            if top is not None and (result.cursor is None or top > result.cursor):
                result.cursor = top
    return result


async def walk_unsorted(
    fetch: Callable[[int], Awaitable[Page]],
    since: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
) -> PollResult:
    """Every page by number (id order), rows stamped before `since` left out (an upstream that
    ignores the filter too serves them); the cursor is the newest stamp seen, or `since` when
    the listing changed while walked (`links.last` moved): the next poll reads it again."""
    result = PollResult()
    first_last = last = None  # `links.last` of the first page and of the last one read
    async for page in paging.walk(fetch, 1, next_number, asked=asked):
        result.requests += 1
        first_last = page.last if first_last is None else first_last
        last = page.last
        rows = []
        for r in page.resources:
            stamp = normalize_or_none((r.get("attributes") or {}).get(stamp_field))
            if stamp is not None and stamp < since:
                continue
            rows.append(r)
            if stamp is not None and (result.cursor is None or stamp > result.cursor):
                result.cursor = stamp
        if rows:
            on_page(replace(page, resources=rows))
            result.rows += len(rows)
    if last != first_last and result.cursor is not None:
        result.cursor = since
    return result


class Poller:
    """Incremental polls of the mirrored types and of the deletions feed."""

    def __init__(
        self,
        client: ChannelClient,
        mirror: Mirror,
        *,
        page_size: int,
        overlap: float,
        on_unknown_type: Callable[[str, int], None] | None = None,
        on_lag: OnLag | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.page_size = page_size
        self.overlap = overlap
        #: Told (resource_type, entries) of feed entries of a type it cannot map (metrics).
        self.on_unknown_type = on_unknown_type
        self.on_lag = on_lag  # the changes a poll commits, and how late (`sync.jobs.freshness`)
        self.log = get_logger("sync.poll")

    def _not_after_now(self, cursor: str | None) -> str | None:
        """A stamp in the future (skewed upstream clocks) must not carry the cursor past now:
        changes stamped between now and that stamp would be skipped by every later poll."""
        if cursor is None:
            return None
        return min(cursor, iso_ms(time.time() + self.client.clock_offset))

    async def poll_type(self, rtype: ResourceType, malls: Sequence[int], concurrency: int) -> int:
        """Poll every scope of `rtype` (one per mall for mall-scoped types), `concurrency` at a
        time; the rows changed. A scope never polled (a mall that appeared since the backfill)
        starts from a day ago on the upstream's clock."""
        changed = 0

        async def one(scope: Scope) -> None:
            nonlocal changed
            try:
                rows = (await self.poll_scope(scope)).rows
            except LookupError:
                start = iso_ms(time.time() + self.client.clock_offset - 86400)
                self.mirror.set_cursor(rtype.name, scope.key, start)
                rows = (await self.poll_scope(scope)).rows
            changed += rows  # after the await: scopes run side by side

        await bounded(scopes_of(rtype, malls), concurrency, one)
        return changed

    async def poll_scope(self, scope: Scope) -> PollResult:
        """Fetch the rows of one scope changed since its cursor; advance the cursor."""
        rtype = scope.rtype
        cursor = self.mirror.get_cursor(rtype.name, scope.key)
        if cursor is None:
            raise LookupError(
                f"{rtype.name} [{scope.key or 'top'}] has no cursor yet; run `ccsync backfill` first"
            )
        since = shift(cursor, -self.overlap)
        route = self._route(route_key(rtype))

        async def fetch(anchor: str, number: int, sort: str = "updated_at") -> Page:
            page = await self.client.list_page(
                rtype,
                number,
                mall_id=scope.mall_id,
                scope_params=scope.params,
                params={"filter[updated_at][gte]": anchor, "sort": sort},
                size=self.page_size,
                # Nothing changed since the same query last answered: 304, no body to move
                # (only where the ETag proved reliable, when a profile is known).
                conditional=route is None or route.conditional,
            )
            if not page.resources:  # no row to write, but the type's scripts may have changed
                self.mirror.write_scripts(rtype, page.meta.get("scripts"))
            return page

        def write(page: Page) -> None:
            ids = [parse_id(r["id"]) for r in page.resources] if self.on_lag else []
            before = self.mirror.stamps(rtype.name, ids) if ids else {}
            self.mirror.write_staged(
                stage_resources(rtype, page.resources, page.included, scope.mall_id),
                scripts=page.meta.get("scripts"),
            )
            if self.on_lag is not None and ids:
                after = self.mirror.stamps(rtype.name, ids)
                now = upstream_now(self.client)
                self.on_lag(rtype.name, "poll", changed_lags(before, after, now))

        try:
            result = await self._walk(
                route_key(rtype),
                fetch,
                since,
                "updated_at",
                write,
                sorted_ok=route,
                reprobe=lambda: Profiler(self.client).order(rtype, scope.mall_id, "updated_at"),
            )
        except NotFoundError as exc:
            if scope.mall_id is None:
                raise
            # The listing's 404 says nothing of the mall: `GET /malls/{id}` decides (a mall it
            # still serves fails this scope, `ListingMissingError`). The mall is gone upstream:
            # a fact, not a failure. Its memberships, hours and current hours go; its rows no
            # other mall lists are left to the reconcile.
            await confirm_mall_gone(self.client, scope.mall_id, exc)
            self.log.info("poll.mall_gone", type=rtype.name, mall_id=scope.mall_id)
            self.mirror.mall_gone(scope.mall_id)
            return PollResult(requests=1)
        result.cursor = self._not_after_now(result.cursor)
        if result.cursor is not None and result.cursor > cursor:
            self.mirror.set_cursor(rtype.name, scope.key, result.cursor)
        return result

    def _route(self, key: str) -> RouteProfile | None:
        profile = self.client.profile
        return profile.route(key) if profile is not None else None

    async def _walk(
        self,
        key: str,
        fetch: Callable[..., Awaitable[Page]],
        since: str,
        stamp_field: str,
        on_page: Callable[[Page], None],
        *,
        sorted_ok: RouteProfile | None,
        reprobe: Callable[[], Awaitable[Verdict]],
    ) -> PollResult:
        """By key where the order is honoured (or not yet probed), else unsorted; a walk by
        key that meets a page out of order re-probes the route and goes on unsorted."""

        paging = self.client.paging
        if sorted_ok is None or sorted_ok.sorted_walk:
            try:
                return await walk_by_stamp(
                    fetch, since, stamp_field, paging, self.page_size, on_page
                )
            except OutOfOrder as exc:
                # A lagging replica's page can look out of order too: the route is asked
                # again, and marked only if the probe agrees. This poll goes on unsorted.
                verdict = await reprobe()
                self.log.warning("poll.out_of_order", route=key, seen=str(exc), probe=verdict)
                if verdict != "honoured":
                    if self.client.profile is None:
                        self.client.profile = UpstreamProfile()
                    contradicted(self.client.profile, key, str(exc), self.client.save_profile)
        return await walk_unsorted(
            lambda n: fetch(since, n, "id"), since, stamp_field, paging, self.page_size, on_page
        )

    async def poll_deletions(self, mirrored: set[str]) -> PollResult:
        """Apply the deletions feed since its cursor to the mirrored types."""
        cursor = self.mirror.get_cursor(DELETIONS, "")
        if cursor is None:
            raise LookupError("the deletions feed has no cursor yet; run `ccsync backfill` first")
        since = shift(cursor, -self.overlap)

        async def fetch(anchor: str, number: int, sort: str = "created_at") -> Page:
            return await self.client.list_deletions(
                number, since=anchor, size=self.page_size, sort=sort
            )

        # Each entry is dated evidence about one row (`sync.jobs.feed`).
        apply = FeedEntries(self.mirror, mirrored, on_unknown=self.on_unknown_type).apply

        result = await self._walk(
            DELETIONS_ROUTE,
            fetch,
            since,
            "created_at",
            apply,
            sorted_ok=self._route(DELETIONS_ROUTE),
            reprobe=lambda: Profiler(self.client).deletions_order(),
        )
        result.cursor = self._not_after_now(result.cursor)
        if result.cursor is not None and result.cursor > cursor:
            self.mirror.set_cursor(DELETIONS, "", result.cursor)
        return result


def poll_types(types: list[ResourceType]) -> list[ResourceType]:
    """The types an incremental poll covers: those with `updated_at` to filter on."""
    return [t for t in types if t.has_updated_at]
