"""`ChannelClient`: the Channel Content API as the rest of `sync` sees it: its listing endpoints.

Layers, each one job, each held by the one above (composition, no base class): a transport
(`sync.channel.protocols.Sender`; the retrying `Transport`: retries, backoff, concurrency)
-> `Credentials` (token, signature, clock offset) -> `ChannelSession` (login, re-login on 401,
skew, status -> exception, the paged GET and its one loop) -> `ChannelClient`: this module's
listings (JSON:API validation into `Page`), holding the session (`client.session`), the include
fallback (`client.includes`, `sync.channel.includes`) and the subscriptions (`client.webhooks`,
`sync.channel.webhooks`) as parts -> callers (backfill, polls, reconcile, worker,
subscriptions). As httpx's `Client(transport=...)`, the transport can be given
(`ChannelClient(settings, transport=...)`): tests answer requests with a function
(`tests/support/transport.py`). What the listings teach is the client's: "now" on the stamps'
scale (`clock`) and the upstream profile (`profile`, changed only through `learn_profile`);
what the session asks with (page size, accounts) is the session's, and the client holds those
parts for its callers (`client.paging`, `.accounts`, `.stats`): nobody outside `sync.channel`
reaches through `client.session`.

A listing request is a value (`sync.channel.listing.Listing`: a `Scope` and what is asked of
it), built once and handed down, as httpx hands a `Request`.

Listing requests give every parameter explicitly, as the spec advises ("so that changes of
defaults do not change results"): `page[size]`, `page[number]`, `sort`, `include`, `fields[...]`.
The default `sort=id` keeps page-number paging stable: ids only grow, so rows created during a
walk land at the end instead of shifting every later page by one (which would skip a row), and
an `updated_at` sort would move a row edited mid-walk past pages already read. Callers that
want another order (the incremental poll: `sort=updated_at`) pass `sort` in `params`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import date
from types import TracebackType
from typing import Any, Self

from sync.channel.clock import UpstreamClock
from sync.channel.includes import IncludeFallback
from sync.channel.listing import Listing
from sync.channel.pages import Page, decode_listing, to_page
from sync.channel.profile import META_KEY as PROFILE_KEY
from sync.channel.profile import UpstreamProfile
from sync.channel.protocols import MetaStore, Sender
from sync.channel.session import ChannelSession
from sync.channel.transport import Response
from sync.channel.webhooks import WebhookEndpoints
from sync.core.config import UpstreamSettings
from sync.core.errors import BadResponseError, UpstreamError
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope

MAX_IDS = 100
#: Conditional listings whose ETag the client remembers (a poll cycle has one per scope).
ETAG_ENTRIES = 20_000


class ChannelClient:
    """Signed, retried access to the Channel Content API: the listing endpoints, holding the
    session (`session`: login, signing, status -> exception, the paged GET, over a transport),
    the include fallback (`includes`) and the subscriptions (`webhooks`); "now" on the stamps'
    scale (`clock`) and the upstream profile (`profile`) are what its listings teach.

    `transport`: what sends each request (`sync.channel.protocols.Sender`; None: the retrying
    `Transport` over aiohttp), as httpx's `Client(transport=...)`; `store`: where what the
    client learns outlives the process, given here and nowhere else."""

    def __init__(
        self,
        settings: UpstreamSettings,
        *,
        transport: Sender | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        fail_fast: bool = True,
        store: MetaStore | None = None,
    ) -> None:
        self.session = ChannelSession(
            settings, transport=transport, sleep=sleep, clock=clock, fail_fast=fail_fast
        )
        #: The session's parts its callers use, held here so nobody reaches through the
        #: session: the page size and the stop rule (`sync.channel.paging`: `paging.size`,
        #: `paging.more`, `paging.walk_numbers`), the accounts (tokens, budgets, pinning) and
        #: the request counts (`Stats`).
        self.paging = self.session.paging
        self.accounts = self.session.accounts
        self.stats = self.session.stats
        #: What the client was built with: `settings.concurrency` bounds callers' fan-out too;
        #: `fail_fast`, whether an unreachable upstream raises at once (see `ChannelSession`).
        self.settings = settings
        self.fail_fast = fail_fast
        self._clock = clock
        #: "Now" on the scale of the stamps served, learned from them (`sync.channel.clock`);
        #: the `Date` header's offset (`session.clock_offset`) is for signing only.
        self.clock = UpstreamClock(local=clock, date_offset=lambda: self.session.clock_offset)
        #: What the upstream answered where the spec is silent (`sync.channel.profile`): None
        #: until probed or kept; changed only through `learn_profile`.
        self._profile: UpstreamProfile | None = None
        #: Where what this client learns outlives the process (`store=`): None keeps nothing.
        self._store: MetaStore | None = None
        #: The ETag each conditional listing last answered with (`ETAG_ENTRIES`, oldest dropped).
        self._etags: OrderedDict[str, str] = OrderedDict()
        self.includes = IncludeFallback(self)
        self.webhooks = WebhookEndpoints(self.session)
        if store is not None:
            self._keep(store)

    async def __aenter__(self) -> Self:
        await self.session.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.session.__aexit__(exc_type, exc, tb)

    def _keep(self, store: MetaStore) -> None:
        """Keep what this client learns in `store` (the mirror's `_sync_meta`) and restore
        what an earlier run learned there: the session's page size and accounts' routes
        (`ChannelSession.keep`), "now" on the stamps' scale (`UpstreamClock`) and the upstream
        profile. Given once, to the constructor (`ChannelClient(settings, store=mirror.meta)`),
        as httpx's client is given its transport: nothing outside configures a client later."""
        if store is self._store:
            return
        self._store = store
        self.session.keep(store)
        self.clock.keep(store.get, store.set)
        if self._profile is None:
            self._profile = UpstreamProfile.from_json(store.get(PROFILE_KEY))

    @property
    def profile(self) -> UpstreamProfile | None:
        """What the upstream answered where the spec is silent; None until probed or kept."""
        return self._profile

    def learn_profile(
        self, profile: UpstreamProfile | None = None, *, save: bool = True
    ) -> UpstreamProfile:
        """Adopt `profile` (a probe's), or with None the current one as changed in place (an
        empty one if none yet), and keep it in the store (`store=`) unless `save` is False.
        The one way the profile changes; returns it."""
        if profile is not None:
            self._profile = profile
        elif self._profile is None:
            self._profile = UpstreamProfile()
        if save and self._store is not None:
            self._store.set(PROFILE_KEY, self._profile.to_json())
        return self._profile

    async def log_in(self, *, every: bool = False) -> int:
        """Log in the first account unless it holds a token already (a backfill's first
        request: a refused login leaves the mirror as it was); `every`: each configured account,
        token or not (`ccsync check`). The number of accounts logged in."""
        accounts = self.accounts.all if every else [self.accounts.first]
        asked = [a for a in accounts if every or not a.credentials.has_token]
        for account in asked:
            await self.session.login(account)
        return len(asked)

    def budget_snapshot(self) -> dict[str, float | int]:
        """The request budget's state (`RequestBudget.snapshot`); empty when it is off."""
        budget = self.session.budget
        return budget.snapshot() if budget else {}

    def query(self, listing: Listing, number: int) -> dict[str, str]:
        """Every parameter of page `number` of `listing`, explicit (the auth parameters are
        added per attempt); include paths the upstream refused on the route left out."""
        rtype = listing.rtype
        out = {**self.session.page_query(number, listing.size), "sort": "id"}
        if listing.include and (paths := self.includes.paths(rtype)):
            out["include"] = paths
        if listing.fields is not None:
            out[f"fields[{rtype.name}]"] = ",".join(listing.fields)
        out.update(listing.scope.params)
        out.update(listing.params)
        if "include" in out and self.profile is not None:
            kept = self.includes.paths(rtype, out["include"])
            if kept:
                out["include"] = kept
            else:
                del out["include"]
        return out

    async def list_page(
        self,
        request: Scope | Listing,
        number: int,
        *,
        conditional: bool = False,
        refusals: bool = True,
        attempts: int | None = None,
        as_asked: bool = False,
    ) -> Page:
        """Page `number` of a listing (a bare `Scope`: its listing with the defaults).

        `conditional`: send `If-None-Match` with the ETag this exact listing (path and query,
        auth parameters aside) last answered with, when that answer held the whole result (a
        page not full): a 304 then means nothing in the result changed, and comes back as an
        empty page whose `not_modified` is set (the caller wrote those rows last time). A full
        page's ETag is never kept: a 304 for it would say nothing of the pages after it. Polls
        use it: an unchanged listing costs a request but no body.

        `attempts`: 5xx answers allowed before `RetriesExhaustedError` (None: the retry budget;
        a listing with `include=` is asked with `INCLUDE_ATTEMPTS` first, see `sync.channel.includes`);
        `as_asked`: the listing's own include paths sent even where the profile holds them
        refused (a probe asks each path again)."""
        listing = Listing.of(request)
        path, query = listing.path, self.query(listing, number)
        if as_asked and "include" in listing.params:
            query["include"] = listing.params["include"]
        key = etag = None
        if conditional:
            key = path + "?" + "&".join(f"{k}={v}" for k, v in sorted(query.items()))
            etag = self._etags.get(key)
        headers = {"If-None-Match": etag} if etag else None
        try:
            resp = await self.session.get_listing(
                path, query, headers, attempts or self.includes.attempts(query, refusals)
            )
        except UpstreamError as exc:
            # `refusals=False`: a probe's own request (no fallback inside the fallback), and
            # the one retry after it (a path refused again is not asked about twice).
            if not refusals or attempts is not None:
                raise
            if not await self.includes.refused(exc, listing.scope, query):
                if not self.includes.failing(exc, query):
                    raise
                # A 5xx no include path causes: asked again with the whole retry budget.
                resp = await self.session.get_listing(path, query, headers)
                return self._page(resp, number, query, key, etag)
            return await self.list_page(listing, number, refusals=False)
        return self._page(resp, number, query, key, etag)

    def _page(
        self,
        resp: Response,
        number: int,
        query: Mapping[str, str],
        key: str | None,
        etag: str | None,
    ) -> Page:
        """The `Page` of a listing's answer (a 304 to `If-None-Match: etag` an empty one whose
        `not_modified` is set); the ETag kept under `key` when the answer held the whole result."""
        if resp.status == 304 and etag is not None:
            return Page([], [], {}, number, number, self.session.api_version, not_modified=True)
        doc = decode_listing(resp.body, resp.url, resp.status)
        page = to_page(doc, number, resp.url, resp.status, self.session.api_version)
        self.clock.observe_resources(page.resources, "updated_at", self._clock())
        if key is not None:
            tag = resp.headers.get("ETag")
            if tag and not self.session.paging.more(page, int(query["page[size]"])):
                self._etags[key] = tag
                self._etags.move_to_end(key)
                while len(self._etags) > ETAG_ENTRIES:
                    self._etags.popitem(last=False)
            else:
                self._etags.pop(key, None)
        return page

    async def list_members(
        self,
        rels: Sequence[str],
        number: int,
        *,
        size: int,
        etag: str | None = None,
    ) -> tuple[Page, str | None]:
        """One page of `GET /malls` carrying its malls' members: `include=<rels>` with sparse
        fieldsets (the malls' `rels` linkage, the members' `updated_at` only), sorted by id.

        `etag`: sent as `If-None-Match`; a 304 comes back as an empty page whose
        `not_modified` is set. Returns the page and its ETag, which the caller keeps only once
        it has acted on the page (`sync.jobs.malls.mallincludes`): a 304 must never hide an unapplied change."""
        query = {
            **self.session.page_query(number, size),
            "sort": "id",
            "include": ",".join(rels),
            "fields[malls]": ",".join(rels),
            **{f"fields[{r}]": "updated_at" for r in rels},
        }
        resp = await self.session.get_listing(
            "/malls", query, headers={"If-None-Match": etag} if etag else None
        )
        if resp.status == 304 and etag is not None:
            return Page(
                [], [], {}, number, number, self.session.api_version, not_modified=True
            ), etag
        doc = decode_listing(resp.body, resp.url, resp.status)
        return to_page(
            doc, number, resp.url, resp.status, self.session.api_version
        ), resp.headers.get("ETag")

    async def list_response(
        self,
        request: Scope | Listing,
        number: int,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Page `number` of a listing as the raw answer, not parsed (the backfill parses
        pages in a worker process; see `sync.pipeline.staging.stage_listing`)."""
        listing = Listing.of(request)
        query = self.query(listing, number)
        try:
            return await self.session.get_listing(
                listing.path, query, headers, self.includes.attempts(query)
            )
        except UpstreamError as exc:
            if not await self.includes.refused(exc, listing.scope, query):
                if not self.includes.failing(exc, query):
                    raise
                # A 5xx no include path causes: asked again with the whole retry budget.
                return await self.session.get_listing(listing.path, query, headers)
            return await self.session.get_listing(
                listing.path, self.query(listing, number), headers=headers
            )

    async def iter_pages(self, request: Scope | Listing, start: int = 1) -> AsyncIterator[Page]:
        """Pages of a listing in order from `start` until the stop rule (`walk`)."""
        listing = Listing.of(request)

        def fetch(number: int) -> Awaitable[Page]:
            return self.list_page(listing, number)

        async for page in self.session.walk(fetch, start):
            yield page

    async def fetch_ids(self, scope: Scope, ids: Sequence[str | int]) -> Page:
        """Up to 100 resources of `scope` by `filter[id]`, every page of the answer read (an
        upstream that serves fewer rows a page than asked answers in several): what is not in
        the result is not served in this scope, which a short first page alone never proves.
        Once every id asked is served no page can hold more, so a full last page is not
        followed by a request for the empty one after it (#47: 100 ids cost one request)."""
        if len(ids) > MAX_IDS:
            raise ValueError(f"fetch_ids takes at most {MAX_IDS} ids, got {len(ids)}")
        if not ids:
            # `filter[id]=` might be read as "no filter", i.e. the whole collection.
            return Page([], [], {}, 1, 1, self.session.api_version)
        listing = Listing(scope, {"filter[id]": ",".join(str(i) for i in ids)}, size=MAX_IDS)

        def fetch(number: int) -> Awaitable[Page]:
            return self.list_page(listing, number)

        pages: list[Page] = []
        unserved = {str(i) for i in ids}
        async for page in self.session.walk(fetch):  # a walk may be left early (`Paging.walk`)
            pages.append(page)
            unserved.difference_update(str(r.get("id")) for r in page.resources)
            if not unserved:
                break
        if len(pages) == 1:
            return pages[0]
        return Page(
            [r for p in pages for r in p.resources],
            [i for p in pages for i in p.included],
            pages[0].meta,
            1,
            1,
            self.session.api_version,
        )

    async def list_deletions(
        self,
        number: int,
        *,
        since: str | None = None,
        size: int | None = None,
        sort: str | None = "created_at",
        op: str = "gte",
        until: str | None = None,
        until_op: str = "lte",
    ) -> Page:
        """A page of the deletions feed, oldest first, from `since` (created_at, inclusive;
        exclusive with `op="gt"`) up to `until` (inclusive; exclusive with `until_op="lt"`)
        when given; `sort=None` asks for none (an upstream that does not honour it,
        `UpstreamProfile`)."""
        query: dict[str, str] = {}
        if sort:
            query["sort"] = sort
        if since:
            query[f"filter[created_at][{op}]"] = since
        if until:
            query[f"filter[created_at][{until_op}]"] = until
        page = await self.session.get_page("/deletions", number, query, size)
        self.clock.observe_resources(page.resources, "created_at", self._clock())
        return page

    async def resource(self, rtype: ResourceType, rid: int | str) -> dict[str, Any]:
        """`GET /<type>/{id}`: one resource (`NotFoundError` when the upstream has none): the
        only evidence, besides the deletions feed, that a mall is gone (a 404 from one of its
        listings says nothing of the mall, `sync.jobs.evidence.confirm_mall_gone`)."""
        doc, _ = await self.session.get_document(f"/{rtype.path}/{rid}", {})
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict):
            raise BadResponseError(
                "a single resource without a `data` object",
                url=f"{self.session.base}/{rtype.path}/{rid}",
            )
        return data

    async def related_one(self, path: str) -> Any:
        """The `data` of a to-one relationship route (`/<type>/{id}/<rel>`) as sent (None when
        the answer holds none): `sync.jobs.malls.relroutes` reads what an include refused."""
        doc, _ = await self.session.get_document(path, {})
        return doc.get("data") if isinstance(doc, dict) else None

    async def related_page(self, path: str, number: int) -> Page:
        """Page `number` of a to-many relationship route (`/<type>/{id}/<rel>`), every
        parameter explicit; no sort, include or ETag (the route takes none)."""
        query = {"page[size]": str(self.session.page_size()), "page[number]": str(number)}
        doc, _ = await self.session.get_document(path, query)
        return to_page(doc, number, path, 200, self.session.api_version)

    # -- hours ---------------------------------------------------------------------------------

    async def hours(self, mall_id: int | str, start: date, end: date) -> list[dict[str, Any]]:
        """The `hours` resources of a mall from `start` to `end` (inclusive bounds, no paging;
        the answer is application/json, still a `data` list)."""
        doc, _ = await self.session.get_document(
            f"/malls/{mall_id}/hours", {"from": start.isoformat(), "to": end.isoformat()}
        )
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list):
            raise BadResponseError(
                "hours without a `data` list", url=f"{self.session.base}/malls/{mall_id}/hours"
            )
        return [d for d in data if isinstance(d, dict)]

    async def current_hours(self, mall_id: int | str) -> Any:
        """The /current-hours body as sent: the spec does not describe its shape."""
        doc, _ = await self.session.get_document(f"/malls/{mall_id}/current-hours", {})
        return doc
