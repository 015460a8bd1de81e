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
  when one disagrees, the view is replaced by a table filled from every mall's route.

The decision is kept in `_sync_meta` (`mall_routes`), shown by `ccsync status`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import orjson

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.core.errors import NotFoundError, UpstreamError
from sync.core.logs import get_logger
from sync.jobs.fetch import confirm_mall_gone, parse_id
from sync.model import catalogue
from sync.store import Mirror

Source = Literal["include", "derived", "unchecked", "route"]
META_KEY = "mall_routes"
#: The top-level types whose malls may come from `/malls/{id}/<type>`.
ROUTED_BY_MALL = frozenset({"contacts", "deals"})
#: Malls whose deals route is compared with the derivation.
SAMPLE = 3

_log = get_logger("sync.mallroutes")


class MallRoutes:
    """Decides the source of the malls' contacts and deals memberships, and keeps them."""

    def __init__(self, client: ChannelClient, mirror: Mirror) -> None:
        self.client = client
        self.mirror = mirror

    def decisions(self) -> dict[str, str]:
        raw = self.mirror.get_meta(META_KEY)
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
        self.mirror.set_meta(META_KEY, orjson.dumps(now).decode())

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
            if not check_deals and not self.mirror.schema.mall_deals_is_table():
                if self.decisions().get("deals") != "derived":
                    self._decide("deals", "unchecked", "derived; checked by the daemon")
                return out
            why = await self._deals_disagree(malls)
            if why is None:
                self._decide("deals", "derived", "the mall routes agree with the derivation")
            else:
                self._decide("deals", "route", why)
                self.mirror.schema.materialize_mall_deals()
                out["deals"] = await self.from_routes("deals", malls)
        return out

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
        404 confirmed by `GET /malls/{id}`, `confirm_mall_gone`). The pages `links.last` names
        are asked side by side (a mall's deals route holds every national deal: tens of pages
        on a large upstream), then any past it one by one (a 404 there is the end)."""
        # The type as its mall route lists it: `/malls/{id}/<type>`, its default filters.
        rtype = replace(catalogue.TYPES[name], level="mall", relationships=(), scope_params=({},))

        async def page(number: int) -> Page:
            return await self.client.list_page(
                rtype, number, mall_id=mall, fields=["updated_at"], include=False
            )

        try:
            first = await page(1)
            pages = [first]
            if self.client.paging.more(first) and first.last > 1:
                limit = asyncio.Semaphore(self.client.settings.concurrency)

                async def bounded(number: int) -> Page:
                    async with limit:
                        return await page(number)

                pages += await asyncio.gather(*(bounded(n) for n in range(2, first.last + 1)))
            tail = pages[-1]
            if self.client.paging.more(tail) and tail.number >= first.last:
                walk = self.client.walk(page, tail.number + 1, promised=tail.number < tail.last)
                pages += [p async for p in walk]
        except NotFoundError as exc:
            await confirm_mall_gone(self.client, mall, exc)
            return None
        return sorted({parse_id(r["id"]) for p in pages for r in p.resources})

    async def _deals_disagree(self, malls: Sequence[int]) -> str | None:
        if self.mirror.schema.mall_deals_is_table():
            return "listed per mall since the routes disagreed with the derivation"
        if not self.mirror.has_view("malls_deals"):
            return None  # nothing derived yet (no stores or deals mirrored)
        for mall in list(malls)[:SAMPLE]:
            listed = await self._route_ids("deals", mall)
            if listed is None:
                continue
            derived = self.mirror.mall_deals(mall)
            if listed != derived:
                return (
                    f"GET /malls/{mall}/deals lists {len(listed)} deals, the derivation "
                    f"{len(derived)}"
                )
        return None

    async def from_routes(self, name: str, malls: Sequence[int]) -> int:
        """`malls_<name>` of every mall in `malls` from its route; memberships written."""
        written = 0
        for mall in malls:
            ids = await self._route_ids(name, mall)
            if ids is None:
                continue  # the mall is gone: the reconcile drops it
            written += self.mirror.replace_mall_links(name, mall, ids)
        return written
