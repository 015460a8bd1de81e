"""Malls' contacts and deals: memberships from the mall routes, unless a cheaper source is proven.

The spec's own way to know which contacts and deals belong to a mall is `GET /malls/{id}/contacts`
and `GET /malls/{id}/deals`. Two cheaper sources exist only on some upstreams, so each is
checked at run time (at every reconcile) and dropped when it fails the check:

- **contacts**: the malls' `contacts` linkage through `include=contacts` on `/malls` (the malls'
  own pages then bring `malls_contacts`). Valid include names are "not shown": one request
  (`/malls?page[size]=1&include=contacts`) shows whether linkage (`data`) is served. When it is
  not (links only, or a 400), `malls_contacts` is filled from each mall's route.
- **deals**: the view `malls_deals` derives a mall's deals from a rule our emulator follows
  (local deals through their stores' malls, Public national deals unless
  `exclude_national_deals`), which the spec never states. Listing national deals once per mall
  would dwarf the mirror, so the rule is kept when a few malls' routes agree with it exactly;
  when one disagrees, the view is replaced by a table filled from every mall's route. Where the
  rule cannot be built (no deal serves `stores` linkage, so there is nothing to derive from) or
  cannot be checked (no mall's route could be compared), the routes fill the table too, after a
  backfill as well as in the daemon: `malls_deals` always comes from evidence (#37).

Where the routes are the source, the rows that changed are asked of them after each poll
(`sync.jobs.malls.touchedmalls`), once per change; a whole walk of every route is the proof's and the
reconcile's (`refresh`).

The decision is kept in `_sync_meta` (`mall_routes`), with what it rests on (`mall_routes_why`:
how many malls' routes the rule was checked against, or why the routes fill the table), both
shown by `ccsync status`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import orjson

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.paging import PAST_END, Paging, reask
from sync.core.errors import ListingUnsettledError, NotFoundError, UpstreamError
from sync.core.logs import get_logger
from sync.jobs.evidence import Asked, confirm_mall_gone
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore
from sync.store.schema import VIEWS

Source = Literal["include", "derived", "unchecked", "route"]
META_KEY = "mall_routes"
#: What each decision rests on, shown by `ccsync status`.
WHY_KEY = "mall_routes_why"
#: The top-level types whose malls may come from `/malls/{id}/<type>`.
ROUTED_BY_MALL = frozenset({"contacts", "deals"})
#: The change feed's sequence number each routed type's changes are followed through
#: (`MallRoutes.followed`, `sync.jobs.malls.touchedmalls`).
FOLLOWED_KEY = "mall_routes_followed"
#: Malls whose deals route is compared with the derivation.
SAMPLE = 3

_log = get_logger("sync.mallroutes")


@dataclass(frozen=True)
class _Verdict:
    """The derivation checked against the mall routes: whether they agreed, and on what."""

    agreed: bool
    why: str


#: Walks of a mall's route before a listing that shrinks under each is reported unsettled.
ROUTE_WALKS = 3


class _Shrank(Exception):
    """A page page 1 promised went while a mall route was walked (`MallRoutes._route_walk`)."""


class Fanout(Protocol):
    """The settings a fan-out reads: how many requests at once (`UpstreamSettings`)."""

    @property
    def concurrency(self) -> int: ...


class Routes(Asked, Protocol):
    """What `MallRoutes` (and `TouchedMalls`) ask of the upstream client (`ChannelClient`,
    or a test's fake): `GET /malls` with members, the mall routes and their walk, the
    evidence that a mall is gone, and how many requests to send at once."""

    paging: Paging

    @property
    def settings(self) -> Fanout: ...

    async def list_members(
        self, rels: Sequence[str], number: int, *, size: int
    ) -> tuple[Page, str | None]: ...

    async def list_page(self, request: Scope | Listing, number: int) -> Page: ...


class MallRoutes:
    """Decides the source of the malls' contacts and deals memberships, and keeps them."""

    def __init__(self, client: Routes, mirror: MirrorStore) -> None:
        self.client = client
        self.mirror = mirror

    def decisions(self) -> dict[str, str]:
        raw = self.mirror.meta.get(META_KEY)
        try:
            out = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return {}
        return out if isinstance(out, dict) else {}

    def deals_unproven(self) -> bool:
        """Whether `malls_deals` rests on no check yet: `unchecked`, or `derived` with no view
        to derive from (a mirror written before #37 took that for agreement)."""
        source = self.decisions().get("deals")
        if source == "unchecked":
            return True
        schema = self.mirror.schema
        return (
            source == "derived"
            and not schema.mall_deals_is_table()
            and not self.mirror.schema.has_view("malls_deals")
        )

    def reasons(self) -> dict[str, str]:
        """What each decision rests on (`WHY_KEY`)."""
        raw = self.mirror.meta.get(WHY_KEY)
        try:
            out = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return {}
        return out if isinstance(out, dict) else {}

    def _decide(self, name: str, source: Source, why: str) -> None:
        now = self.decisions()
        if now.get(name) != source:
            _log.info("mall_routes.decided", type=name, source=source, why=why)
        now[name] = source
        self.mirror.meta.set(META_KEY, orjson.dumps(now).decode())
        reasons = self.reasons()
        reasons[name] = why
        self.mirror.meta.set(WHY_KEY, orjson.dumps(reasons).decode())

    async def refresh(
        self, types: Sequence[str], malls: Sequence[int], *, check_deals: bool = True
    ) -> dict[str, int]:
        """Check the sources of the mirrored ones of contacts and deals; fill from the routes
        what has no cheaper proven source. Returns memberships written per type.

        `check_deals=False` (a backfill: listing three malls' deal routes, every national
        deal in each, would be a tenth of a large backfill's time) keeps a derivation not yet
        checked as `unchecked`; the daemon checks it beside its first jobs, and every
        reconcile checks it again."""
        out: dict[str, int] = {}
        if "contacts" in types and malls:
            if await self._contacts_linked():
                self._decide("contacts", "include", "GET /malls?include=contacts serves linkage")
            else:
                self._decide("contacts", "route", "GET /malls?include=contacts serves no linkage")
                out["contacts"] = await self.from_routes("contacts", malls)
        if "deals" in types and malls:
            written = await self._deals(malls, check=check_deals)
            if written is not None:
                out["deals"] = written
        return out

    async def _deals(self, malls: Sequence[int], *, check: bool) -> int | None:
        """Decide where `malls_deals` comes from; the memberships written from the routes, or
        None when the derivation stands (or nothing is mirrored to decide on)."""
        schema = self.mirror.schema
        if not schema.mall_deals_is_table():
            schema.ensure_views()
            if not self.mirror.schema.has_view("malls_deals"):
                missing = self._underivable()
                if missing is None:
                    self._decide("deals", "unchecked", "no deal mirrored yet")
                    return None
                return await self._deals_from_routes(malls, missing)
            if not check:
                if self.decisions().get("deals") != "derived":
                    self._decide("deals", "unchecked", "the daemon checks it at its next start")
                return None
            verdict = await self._deals_check(malls)
            if verdict.agreed:
                self._decide("deals", "derived", verdict.why)
                return None
            return await self._deals_from_routes(malls, verdict.why)
        return await self._deals_from_routes(
            malls, self.reasons().get("deals") or "the mall routes disagreed with the derivation"
        )

    async def _deals_from_routes(self, malls: Sequence[int], why: str) -> int:
        self._decide("deals", "route", why)
        self.mirror.schema.materialize_mall_deals()
        return await self.from_routes("deals", malls)

    def _underivable(self) -> str | None:
        """Why the derivation cannot be built while deals are mirrored; None: no deal is."""
        schema = self.mirror.schema
        if "id" not in schema.columns("deals") or not self.mirror.table("deals").count():
            return None
        if not schema.columns("deals_stores"):
            return "no deal serves stores linkage"
        for table, cols in VIEWS["malls_deals"][0]:
            if not set(cols) <= schema.columns(table):
                absent = ", ".join(sorted(set(cols) - schema.columns(table)))
                return f"{table} lacks {absent}: the derivation cannot be built"
        return "the derivation cannot be built"

    async def _contacts_linked(self) -> bool:
        try:
            page, _ = await self.client.list_members(["contacts"], 1, size=1)
        except UpstreamError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                return False
            raise
        for mall in page.resources:
            rel = (mall.get("relationships") or {}).get("contacts")
            return isinstance(rel, dict) and isinstance(rel.get("data"), list)
        return True  # no mall: nothing to decide

    async def _route_ids(self, name: str, mall: int) -> list[int] | None:
        """Every id `/malls/{mall}/<name>` lists (its default filters), or None if gone (its
        404 confirmed by `GET /malls/{id}`, `confirm_mall_gone`). A listing that shrank while
        walked (a page page 1 promised answered 404, came empty or named an earlier last page,
        and page 1 no longer promises it: rows left an earlier page, later ones moved up past
        the walk) is no whole list: walked again from
        page 1, `ROUTE_WALKS` times at most, then `ListingUnsettledError`, never the mall gone."""
        for _ in range(ROUTE_WALKS):
            try:
                return await self._route_walk(name, mall)
            except _Shrank:
                _log.info("mall_routes.listing_shrank", type=name, mall_id=mall)
        raise ListingUnsettledError(
            f"/malls/{mall}/{name} shrank under each of {ROUTE_WALKS} walks",
            hint="the mall's listing kept changing while read; it is read again by the next "
            "run (`ccsync reconcile` once it holds still)",
        )

    async def _route_walk(self, name: str, mall: int) -> list[int] | None:
        """One walk of `_route_ids`: the pages `links.last` names are asked side by side (a
        mall's deals route holds every national deal: tens of pages on a large upstream), then
        any past it one by one (a 404 there is the end). `_Shrank` when a promised page went."""
        listing = Listing(route_scope(name, mall), fields=["updated_at"], include=False)

        async def page(number: int) -> Page:
            return await self.client.list_page(listing, number)

        try:
            first = await page(1)
            pages = [first]
            if self.client.paging.more(first) and first.last > 1:
                limit = asyncio.Semaphore(self.client.settings.concurrency)

                async def bounded(number: int) -> Page:
                    async with limit:
                        try:
                            got = await page(number)
                        except UpstreamError as exc:
                            if exc.status not in PAST_END:
                                raise
                            # Promised by page 1: asked again while page 1 still promises it.
                            again = await reask(
                                functools.partial(page, number),
                                functools.partial(_page_1_promises, page, number),
                                exc,
                            )
                            if again is None:
                                raise _Shrank from exc  # the listing shrank under the walk
                            return again
                        return await _still_whole(page, got, first.last)

                pages += await asyncio.gather(*(bounded(n) for n in range(2, first.last + 1)))
            tail = pages[-1]
            if self.client.paging.more(tail) and tail.number >= first.last:
                walk = self.client.paging.walk_numbers(
                    page, tail.number + 1, promised=tail.number < tail.last
                )
                pages += [p async for p in walk]
        except NotFoundError as exc:
            await confirm_mall_gone(self.client, mall, exc)
            return None
        return sorted({parse_id(r["id"]) for p in pages for r in p.resources})

    async def _deals_check(self, malls: Sequence[int]) -> _Verdict:
        """The derivation against `SAMPLE` malls' deal routes (a mall gone since is passed
        over); agreement only when at least one mall was compared."""
        compared = deals = 0
        for mall in malls:
            if compared >= SAMPLE:
                break
            listed = await self._route_ids("deals", mall)
            if listed is None:
                continue
            derived = self.mirror.malls.deals(mall)
            if listed != derived:
                return _Verdict(
                    False,
                    f"GET /malls/{mall}/deals lists {len(listed)} deals, the derivation "
                    f"{len(derived)}",
                )
            compared += 1
            deals += len(listed)
        if not compared:
            return _Verdict(False, "no mall's deals route could be compared with the derivation")
        return _Verdict(
            True, f"checked against {compared} malls' routes ({deals} deals listed): agreed"
        )

    async def from_routes(self, name: str, malls: Sequence[int]) -> int:
        """`malls_<name>` of every mall in `malls` (every mall the mirror knows: each caller
        passes them all) from its route; memberships written. The change feed's entries up
        to the walk's start are then followed (`followed`): the walk answered for them."""
        seq = self.mirror.changes.last()
        written = 0
        for mall in malls:
            written += await self.walk_mall(name, mall) or 0
        self.mark_followed(name, seq)
        return written

    async def walk_mall(self, name: str, mall: int) -> int | None:
        """`malls_<name>` of one mall from its whole route: memberships written, or None when
        the mall is gone (the reconcile drops it)."""
        ids = await self._route_ids(name, mall)
        if ids is None:
            return None
        return self.mirror.table(name).replace_mall_links(mall, ids)

    def followed(self) -> dict[str, int]:
        """Per routed type, the change feed's sequence number through which its rows' changes
        have had their malls asked (`sync.jobs.malls.touchedmalls`); none kept: no number."""
        return self.mirror.meta.numbers(FOLLOWED_KEY)

    def mark_followed(self, name: str, seq: int) -> None:
        """`name`'s changes through `seq` have had their malls asked."""
        self.mirror.meta.set_number(FOLLOWED_KEY, name, seq)


def route_scope(name: str, mall: int) -> Scope:
    """The type as its mall route lists it: `/malls/{mall}/<name>`, its default filters."""
    rtype = replace(catalogue.TYPES[name], level="mall", relationships=(), scope_params=({},))
    return Scope(rtype, mall)


async def _still_whole(page: Callable[[int], Awaitable[Page]], got: Page, promised: int) -> Page:
    """A page that page 1 promised (`promised`: its `links.last`), served: `_Shrank` when it
    shows the listing lost rows since page 1 was read, whatever the upstream answers past the
    end: served empty, or naming an earlier last page, while page 1, asked again, no longer
    names `promised` (rows left an earlier page, so one may have moved onto a page already
    read). Still named: the page is taken as served (an empty one ends the listing)."""
    if (got.rows == 0 or got.last < promised) and not await _page_1_promises(page, promised):
        raise _Shrank
    return got


async def _page_1_promises(page: Callable[[int], Awaitable[Page]], number: int) -> bool:
    """Whether page 1 of a listing, asked again, still names page `number` in `links.last`."""
    return (await page(1)).last >= number
