"""Incremental polls: changed rows by `filter[updated_at][gte]`, deletions from the deletions feed.

Both walk a listing from a stamp (`sync.jobs.incremental.walks`): by key in stamp order, a run of equal
stamps longer than a page by id (so the upstream's order of ties cannot hide a row), unsorted
where the order is not honoured. The cursor is the largest stamp a complete walk was served
(the stamps' own clock), capped at the latest "now" any clock claims
(`sync.channel.clock.UpstreamClock.ceiling`). The next poll starts a *lookback* behind it,
learned per type and for the feed from the lateness of commits the polls measure
(`sync.jobs.incremental.lateness`), with a deep re-read every few polls.

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

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from sync.channel.client import ChannelClient
from sync.channel.clock import stamp_seconds
from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.profile import (
    DELETIONS_ROUTE,
    RouteProfile,
    Verdict,
    contradicted,
    learned_compares,
    route_key,
)
from sync.channel.profiler import Profiler
from sync.core.config import Settings
from sync.core.errors import NoProgressError, NotFoundError
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence, confirm_mall_gone
from sync.jobs.fanout import bounded
from sync.jobs.incremental.answered import WaitingNotices, answer_notices
from sync.jobs.incremental.feed import FeedEntries
from sync.jobs.incremental.freshness import OnLag, changed_lags, new_versions
from sync.jobs.incremental.lateness import Lookbacks
from sync.jobs.incremental.recreated import Recreated
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.jobs.incremental.walks import (
    WIDER,
    Compares,
    Comparison,
    OutOfOrder,
    PollResult,
    TieOrder,
    walk_by_stamp,
    walk_unsorted,
)
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms, normalize_or_none, now_iso, shift
from sync.pipeline.encoding import parse_id
from sync.pipeline.staging import stage_resources
from sync.store import MirrorStore

DELETIONS = catalogue.DELETIONS_FEED
#: The default ceiling of the lookback (`[schedule] poll_lookback_max`).
LOOKBACK_MAX = 600.0

__all__ = ["DELETIONS", "OutOfOrder", "PollResult", "Poller", "poll_types"]

#: Called after each poll of a scope: (type or "deletions", late arrivals, lookback in seconds).
OnLateness = Callable[[str, int, float], None]


class Poller:
    """Incremental polls of the mirrored types and of the deletions feed."""

    def __init__(
        self,
        client: ChannelClient,
        mirror: MirrorStore,
        *,
        page_size: int,
        overlap: float,
        on_unknown_type: Callable[[str, int], None] | None = None,
        on_lag: OnLag | None = None,
        lookback_max: float = LOOKBACK_MAX,
        on_lateness: OnLateness | None = None,
        notices: WaitingNotices | None = None,
    ) -> None:
        self.client = client
        #: The durable queue: the update notices a page answered leave it (`answered`).
        self.notices = notices
        self.mirror = mirror
        self.page_size = page_size
        self.overlap = overlap
        #: Told (resource_type, entries) of feed entries of a type it cannot map (metrics).
        self.on_unknown_type = on_unknown_type
        #: The changes a poll commits, and how late (`sync.jobs.incremental.freshness`).
        self.on_lag = on_lag
        self.lookbacks = Lookbacks(
            mirror.meta.get, mirror.meta.set, overlap=overlap, ceiling=lookback_max
        )
        self.on_lateness, self.log = on_lateness, get_logger("sync.poll")
        #: Rows created again under a deleted id: their owners and malls asked once each.
        self.recreated = Recreated(Evidence(client, mirror))
        #: Copies the walk met within the window of their tombstone: `filter[id]` decides.
        self.ties = TombstoneTies(Evidence(client, mirror))

    def _not_after_now(self, cursor: str | None) -> str | None:
        """A stamp in the future (skewed upstream clocks) must not carry the cursor past now:
        changes stamped between now and that stamp would be skipped by every later poll. "Now"
        is the latest any clock claims (`UpstreamClock.ceiling`: local, `Date`, the stamps'),
        so that no slow clock caps a cursor below stamps really served."""
        if cursor is None:
            return None
        return min(cursor, self.client.clock.ceiling())

    async def poll_type(self, rtype: ResourceType, malls: Sequence[int], concurrency: int) -> int:
        """Poll every scope of `rtype` (one per mall for mall-scoped types), `concurrency` at a
        time; the rows changed (`PollResult.changed`). A scope never polled (a mall that
        appeared since the backfill) starts a day before now (`sync.channel.clock`)."""
        changed = 0

        async def one(scope: Scope) -> None:
            nonlocal changed
            try:
                rows = (await self.poll_scope(scope)).changed
            except LookupError:
                start = iso_ms(self.client.clock.now_ts() - 86400)
                self.mirror.cursors.set(rtype.name, scope.key, start)
                rows = (await self.poll_scope(scope)).changed
            changed += rows  # after the await: scopes run side by side

        await bounded(scopes_of(rtype, malls), concurrency, one)
        return changed

    async def poll_scope(self, scope: Scope) -> PollResult:
        """Fetch the rows of one scope changed since its cursor; advance the cursor."""
        rtype = scope.rtype
        cursor = self.mirror.cursors.get(rtype.name, scope.key)
        if cursor is None:
            raise LookupError(
                f"{rtype.name} [{scope.key or 'top'}] has no cursor yet; run `ccsync backfill` first"
            )
        since = shift(cursor, -self.lookbacks.behind(rtype.name, scope.key))
        route = self._route(route_key(rtype))

        async def fetch(
            anchor: str,
            number: int,
            sort: str = "updated_at",
            *,
            op: str = "gte",
            until: str | None = None,
            until_op: str = "lte",
        ) -> Page:
            params = {f"filter[updated_at][{op}]": anchor, "sort": sort}
            if until is not None:
                params[f"filter[updated_at][{until_op}]"] = until
            asked = now_iso()  # before the request waits for the budget (`answered`)
            page = await self.client.list_page(
                Listing(scope, params, size=self.page_size),
                number,
                # Unchanged since it last answered: 304, no body (where the ETag proved reliable).
                conditional=route is None or route.conditional,
            )
            if not page.resources:  # no row to write, but the type's scripts may have changed
                self.mirror.write_scripts(rtype, page.meta.get("scripts"))
            return replace(page, asked_at=asked)

        late: list[float] = []
        changed = 0
        distinct: set[int] = set()  # the rows this walk read, each once (`in_proportion`)

        def write(page: Page) -> None:
            nonlocal changed
            ids = [parse_id(r["id"]) for r in page.resources]
            distinct.update(ids)
            before = self.mirror.table(rtype.name).stamps(ids) if ids else {}
            late.extend(self._late_rows(rtype.name, page, cursor))
            self.mirror.write_staged(
                stage_resources(rtype, page.resources, page.included, scope.mall_id),
                scripts=page.meta.get("scripts"),
            )
            after = self.mirror.table(rtype.name).stamps(ids) if ids else {}
            changed += new_versions(before, after)
            answer_notices(self.notices, rtype.name, page, after)
            if self.on_lag is not None and ids:
                now = self.client.clock.now_ts()
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
            self.mirror.malls.gone(scope.mall_id)
            return PollResult(requests=1)
        self._lateness(rtype.name, scope.key, late, result)
        result.changed = changed
        result.distinct = len(distinct)
        result.cursor = self._not_after_now(result.cursor)
        if result.cursor is not None and result.cursor > cursor:
            self.mirror.cursors.set(rtype.name, scope.key, result.cursor)
        # Copies this walk met within the window of their tombstone (a row created again under
        # a deleted id, stamped near its entry): asked now, not left for the cycle's end.
        await self.ties.settle([rtype.name])
        self._progressed(f"{rtype.name} [{scope.key or 'top'}]", result)
        return result

    def _progressed(self, listing: str, result: PollResult) -> None:
        """A walk that ended on the progress rule (`sync.jobs.incremental.walks`), or spent requests far
        out of proportion to the rows it was served (`in_proportion`), kept what it read and
        moved its cursor as far as that reaches; the poll then fails naming the listing and
        why, so health and `ccsync status` say so (the type's faults, the job's record)."""
        if result.stalled is None:
            limit = in_proportion(result, self.client.paging.size)
            if result.requests > limit:
                result.stalled = (
                    f"{result.requests} requests for {result.distinct} distinct rows, more "
                    f"than the {limit} their pages and tie runs explain"
                )
        if result.stalled is None:
            return
        raise NoProgressError(
            f"the poll of {listing} stopped advancing after {result.requests} requests: "
            f"{result.stalled}",
            hint="the upstream answered the walk's filters against what they ask; the rows "
            "read are kept, the walk asks again next poll, and the proof reads the listing",
        )

    def _late_rows(self, name: str, page: Page, cursor: str) -> list[float]:
        """The lateness (seconds behind `cursor`) of the page's rows stamped before it that
        the mirror did not hold at their stamp: they committed after an earlier poll had read
        past their stamp."""
        older: dict[int, str] = {}
        for r in page.resources:
            s = normalize_or_none((r.get("attributes") or {}).get("updated_at"))
            rid = r.get("id")
            if s is not None and s < cursor and isinstance(rid, int | str) and str(rid).isdigit():
                older[int(rid)] = s
        if not older:
            return []
        held = self.mirror.table(name).stamps(list(older))
        return [
            _seconds_between(s, cursor)
            for rid, s in older.items()
            if rid not in held or (held[rid] or "") < s
        ]

    def _lateness(self, key: str, scope: str, late: list[float], result: PollResult) -> None:
        """Record a poll's late arrivals (`sync.jobs.incremental.lateness`), log and report them."""
        result.late = len(late)
        if late:
            self.lookbacks.saw(key, late)
            self.log.info(
                "poll.late_arrivals",
                type=key,
                scope=scope or "top",
                rows=len(late),
                largest_s=round(max(late), 1),
                lookback_s=round(self.lookbacks.lookback(key), 1),
            )
        if self.on_lateness is not None:
            self.on_lateness(key, len(late), self.lookbacks.lookback(key))

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
        key that meets a page out of order re-probes the route and goes on unsorted; a tie run
        whose read by id fails its check goes on unsorted from the run's stamp."""

        paging = self.client.paging
        if sorted_ok is None or sorted_ok.sorted_walk:
            try:
                return await walk_by_stamp(
                    fetch, since, stamp_field, paging, self.page_size, on_page, self._compares(key)
                )
            except TieOrder as exc:
                # `sort=id` (or `lte`) not honoured on this route: read from the run's stamp
                # in id order by page number, which no order of ties can disturb.
                self.log.warning("poll.tie_run_unchecked", route=key, seen=str(exc))
                at = exc.at
                return await walk_unsorted(
                    lambda n: fetch(at, n, "id"), at, stamp_field, paging, self.page_size, on_page
                )
            except OutOfOrder as exc:
                # A lagging replica's page can look out of order too: the route is asked
                # again, and marked only if the probe agrees. This poll goes on unsorted.
                verdict = await reprobe()
                self.log.warning("poll.out_of_order", route=key, seen=str(exc), probe=verdict)
                if verdict != "honoured":
                    # The profile to mark (an empty one when none is known yet).
                    profile = self.client.learn_profile(save=False)
                    if contradicted(profile, key, str(exc)):
                        self.client.learn_profile()
        return await walk_unsorted(
            lambda n: fetch(since, n, "id"), since, stamp_field, paging, self.page_size, on_page
        )

    def _compares(self, key: str) -> Compares:
        """What route `key`'s date filter compares, as its profile keeps it; what a walk
        learns is kept there (`learned_compares`)."""
        route = self._route(key)
        known = route.compares if route is not None else "unknown"
        level: Comparison = known if known in WIDER else "unknown"

        def learned(wider: Comparison, evidence: str) -> None:
            learned_compares(self.client.learn_profile(save=False), key, wider, evidence)
            self.client.learn_profile()

        return Compares(level, learned)

    async def poll_deletions(self, mirrored: set[str]) -> PollResult:
        """Apply the deletions feed since its cursor to the mirrored types."""
        cursor = self.mirror.cursors.get(DELETIONS, "")
        if cursor is None:
            raise LookupError("the deletions feed has no cursor yet; run `ccsync backfill` first")
        since = shift(cursor, -self.lookbacks.behind(DELETIONS, ""))

        async def fetch(
            anchor: str,
            number: int,
            sort: str = "created_at",
            *,
            op: str = "gte",
            until: str | None = None,
            until_op: str = "lte",
        ) -> Page:
            return await self.client.list_deletions(
                number,
                since=anchor,
                size=self.page_size,
                sort=sort,
                op=op,
                until=until,
                until_op=until_op,
            )

        # Each entry is dated evidence about one row (`sync.jobs.incremental.feed`).
        entries = FeedEntries(self.mirror, mirrored, on_unknown=self.on_unknown_type)
        apply, applies = entries.apply, entries.applies

        late: list[float] = []
        distinct: set[str] = set()  # the entries this walk read, each once (`in_proportion`)

        def measured(page: Page) -> None:
            distinct.update(str(e.get("id")) for e in page.resources)
            late.extend(self._late_entries(page, cursor, applies))
            apply(page)

        result = await self._walk(
            DELETIONS_ROUTE,
            fetch,
            since,
            "created_at",
            measured,
            sorted_ok=self._route(DELETIONS_ROUTE),
            reprobe=lambda: Profiler(self.client).deletions_order(),
        )
        self._lateness(DELETIONS, "", late, result)
        result.distinct = len(distinct)
        # Before the cursor moves: asked again on the next poll if it fails.
        served = await self._settle_ties(entries.tied)
        for name, ids in served.items():
            entries.kept.setdefault(name, []).extend(ids)
        await self.recreated.settle(entries.kept)
        result.cursor = self._not_after_now(result.cursor)
        if result.cursor is not None and result.cursor > cursor:
            self.mirror.cursors.set(DELETIONS, "", result.cursor)
        self._progressed("the deletions feed", result)
        return result

    async def _settle_ties(self, tied: dict[str, list[int]]) -> dict[str, list[int]]:
        """Rows stamped the very moment of their feed entry (`FeedApplied.tied`): deleted and
        created again within one tick of the upstream's clock, or deleted only; `filter[id]`
        decides, in every mall the mirror holds the row in. Not served: deleted, with no
        tombstone (the entry could not date the row). Served: rewritten, kept, and returned
        (per type): created again, for `Recreated` to settle."""
        evidence = Evidence(self.client, self.mirror)
        served: dict[str, list[int]] = {}
        for name, ids in tied.items():
            rtype = catalogue.TYPES[name]
            if rtype.level == "top":
                malls: list[int] = []
            else:
                table = self.mirror.table(name)
                malls = sorted({m for rid in ids for m in table.malls_of(rid)})
                if not malls:
                    continue  # no mall holds it here: the proof's listings decide
            gone = set(await evidence.confirm_gone(scopes_of(rtype, malls), ids))
            removed = self.mirror.table(name).delete(gone) if gone else 0
            kept = [i for i in ids if i not in gone]
            if kept:
                served[name] = kept
            self.log.info(
                "deletions.entry_tied_with_row",
                type=name,
                ids=ids[:20],
                asked=len(ids),
                removed=removed,
                hint="a row stamped the moment of its feed entry: filter[id] decided",
            )
        return served

    def _late_entries(self, page: Page, cursor: str, applies: Callable[[str], bool]) -> list[float]:
        """The lateness of the page's entries dated before `cursor` whose row the mirror still
        holds no newer than the entry: an earlier poll read past their date without them."""
        older: dict[str, dict[int, str]] = {}
        for entry in page.resources:
            attrs: dict[str, Any] = entry.get("attributes") or {}
            at = normalize_or_none(attrs.get("created_at"))
            name = catalogue.normalize_type(str(attrs.get("resource_type", "")))
            rid = attrs.get("resource_id")
            if at is None or at >= cursor or name is None or not applies(name):
                continue
            if isinstance(rid, int | str) and str(rid).isdigit():
                older.setdefault(str(name), {})[int(rid)] = at
        out: list[float] = []
        for name, entries in older.items():
            held = self.mirror.table(name).stamps(list(entries))
            out += [
                _seconds_between(at, cursor)
                for rid, at in entries.items()
                if rid in held and (held[rid] or "") <= at
            ]
        return out


#: A poll's requests in proportion: pages its rows fill, twice (a tie run is read again by id,
#: once more at a wider bound), plus this many a tie run and for the walk itself.
SLACK_REQUESTS = 4


def in_proportion(result: PollResult, page_size: int) -> int:
    """The most requests a poll's walk spends for what it was served: the pages its distinct
    rows fill twice over, plus `SLACK_REQUESTS` for the walk and each tie run. Past it, the walk made no
    progress worth its cost (`Poller._progressed`)."""
    pages = -(-result.distinct // max(1, page_size))
    return 2 * (pages + 1) + SLACK_REQUESTS * (result.ties + 1)


def _seconds_between(earlier: str, later: str) -> float:
    """Seconds from one normalised stamp to a later one."""
    return max(0.0, stamp_seconds(later) - stamp_seconds(earlier))


def poll_types(types: list[ResourceType]) -> list[ResourceType]:
    """The types an incremental poll covers: those with `updated_at` to filter on."""
    return [t for t in types if t.has_updated_at]


async def apply_feed_first(
    client: ChannelClient, mirror: MirrorStore, settings: Settings, types: Sequence[ResourceType]
) -> int | None:
    """Apply the deletions feed since its cursor before a whole pass (`ccsync reconcile`), so
    the deletions it lists are not taken for a glitch by the mass-delete guard: the entries
    applied, or None for a mirror never backfilled (no feed cursor yet)."""
    poller = Poller(
        client,
        mirror,
        page_size=settings.upstream.page_size,
        overlap=settings.schedule.poll_overlap,
        lookback_max=settings.schedule.poll_lookback_max,
    )
    try:
        return (await poller.poll_deletions({t.name for t in types})).rows
    except LookupError:
        return None
