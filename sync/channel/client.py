"""`ChannelClient`: the Channel Content API as the rest of `sync` sees it.

Layers, each one job: `Transport` (retries, backoff, concurrency) -> `Credentials` (token,
signature, clock offset) -> this client (login, re-login on 401, status -> exception, JSON:API
validation into `Page`) -> callers (backfill, polls, reconcile, worker, subscriptions).

Listing requests give every parameter explicitly, as the spec advises ("so that changes of
defaults do not change results"): `page[size]`, `page[number]`, `sort`, `include`, `fields[...]`.
The default `sort=id` keeps page-number paging stable: ids only grow, so rows created during a
walk land at the end instead of shifting every later page by one (which would skip a row), and
an `updated_at` sort would move a row edited mid-walk past pages already read. Callers that
want another order (the incremental poll: `sort=updated_at`) pass `sort` in `params`.

401 means the session ended (someone logged the account out elsewhere, which ends every session
sharing the token): the client logs in again, once per request. A 401 right after that fresh
login cannot be cured by another one and is an `AuthError`. Concurrent 401s share one login.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import date
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from sync.channel.budget import RequestBudget
from sync.channel.pages import Page, decode, decode_listing, to_page
from sync.channel.paging import Paging
from sync.channel.profile import UpstreamProfile, route_key
from sync.channel.signing import Credentials
from sync.channel.transport import Response, Stats, Transport, scrub
from sync.core.config import UpstreamSettings
from sync.core.errors import (
    AuthError,
    BadResponseError,
    ForbiddenError,
    NotFoundError,
    UpstreamError,
)
from sync.core.logs import get_logger
from sync.model.catalogue import ResourceType

ACCEPT = {"Accept": "application/vnd.api+json"}
#: Headers of a request with a JSON:API body: JSON:API requires its media type for bodies too
#: (a strict server answers 415 to `application/json`).
JSONAPI_BODY = {**ACCEPT, "Content-Type": "application/vnd.api+json"}
MAX_IDS = 100


def _error_detail(body: bytes) -> str:
    """The JSON:API error's detail (or title), clipped; '' when the body says nothing usable."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        # An HTML error page may echo the request URL: scrub auth parameters from it.
        return scrub(body[:120].decode("utf-8", "replace").strip())
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        e = errors[0]
        return str(e.get("detail") or e.get("title") or "")[:300]
    if isinstance(doc, dict) and "error" in doc:
        return str(doc["error"])[:300]
    return ""


#: Conditional listings whose ETag the client remembers (a poll cycle has one per scope).
ETAG_ENTRIES = 20_000


class ChannelClient:
    """Signed, retried access to the Channel Content API."""

    def __init__(
        self,
        settings: UpstreamSettings,
        *,
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        fail_fast: bool = True,
    ) -> None:
        """`fail_fast=False` is for the daemon: an upstream unreachable from the start is
        logged and retried until it answers instead of raised (see `sync.channel.transport`)."""
        self.settings = settings
        self.fail_fast = fail_fast
        self.base = settings.base_url
        self._session = session
        self._own_session = session is None
        self._sleep = sleep
        self._clock = clock
        self.credentials = Credentials(settings.email, clock)
        self._login_lock = asyncio.Lock()
        self.api_version: str | None = None
        self._first_major: str | None = None
        self._warned_major = False
        self.log = get_logger("sync.channel")
        self.stats = Stats()  # outlives the transport, so metrics can read it at any time
        self._transport: Transport | None = None
        #: The ETag each conditional listing last answered with (bounded, oldest dropped).
        self._etags: OrderedDict[str, str] = OrderedDict()
        #: The page size asked and the size the upstream proved it serves (`sync.channel.paging`).
        self.paging = Paging(settings.page_size)
        #: What the upstream answered where the spec is silent (`sync.channel.profile`): None
        #: until probed or loaded; `save_profile` keeps a change (set by whoever owns a mirror).
        self.profile: UpstreamProfile | None = None
        self.save_profile: Callable[[], None] | None = None
        rate = settings.max_requests_per_second
        #: The request budget every request of this client takes a slot from (None: off).
        self.budget = (
            RequestBudget(rate, sleep=sleep, concurrency=settings.concurrency) if rate > 0 else None
        )

    async def __aenter__(self) -> ChannelClient:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=max(self.settings.concurrency * 2, 10))
            )
        self._transport = Transport(
            self._session,
            concurrency=self.settings.concurrency,
            timeout=self.settings.timeout,
            retry_budget=self.settings.retry_budget,
            max_backoff=self.settings.max_backoff,
            sleep=self._sleep,
            upstream_now=lambda: self._clock() + self.credentials.offset,
            on_response=self._observe,
            stats=self.stats,
            fail_fast=self.fail_fast,
            budget=self.budget,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.budget is not None:
            await self.budget.close()
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise RuntimeError("use `async with ChannelClient(...)`")
        return self._transport

    @property
    def unreachable(self) -> str | None:
        """Why the upstream was never reached, while a daemon's client keeps trying; else None."""
        return self._transport.unreachable_reason if self._transport is not None else None

    @property
    def clock_offset(self) -> float:
        """Seconds to add to local time to get the upstream's time."""
        return self.credentials.offset

    def _observe(self, response: Response) -> None:
        self.credentials.learn_offset(response.headers.get("Date"))
        version = response.headers.get("X-API-Version")
        if not version:
            return
        self.api_version = version
        major = version.lstrip("v").split(".")[0]
        if self._first_major is None:
            self._first_major = major
        elif major != self._first_major and not self._warned_major:
            self._warned_major = True
            self.log.warning(
                "upstream.api_major_changed",
                first=f"v{self._first_major}",
                now=version,
                hint="the upstream changed its major API version; check the changelog",
            )

    # -- auth ----------------------------------------------------------------------------------

    async def login(self) -> None:
        """POST /accounts/login; stores the session token."""
        url = f"{self.base}/accounts/login"
        body = {
            "data": {
                "type": "accounts",
                "attributes": {
                    "email": self.settings.email,
                    "password": self.settings.secret_password(),
                },
            }
        }
        resp = await self.transport.send("POST", url, json=body, headers=JSONAPI_BODY)
        if resp.status in (401, 403, 422):
            raise AuthError(
                "login refused",
                url=url,
                status=resp.status,
                hint="check [upstream] email and the password source",
            )
        if resp.status >= 400:
            raise UpstreamError(
                f"login failed: {_error_detail(resp.body)}", url=url, status=resp.status
            )
        doc = decode(resp.body, url, resp.status)
        token = ((doc.get("data") or {}).get("attributes") or {}).get("authentication_token")
        if not isinstance(token, str) or not token:
            raise BadResponseError(
                "login answered without an authentication_token", url=url, status=resp.status
            )
        self.credentials.set_token(token)
        # No e-mail here: it is the auth_id, and logs never carry auth parameters.
        self.log.info("upstream.logged_in")

    async def _ensure_login(self, seen_generation: int, *, relogin: bool) -> None:
        """Log in unless another task already did since `seen_generation` (one login for many
        concurrent 401s)."""
        async with self._login_lock:
            if self.credentials.generation == seen_generation or not self.credentials.has_token:
                await self.login()
                if relogin:
                    self.stats.relogins += 1

    async def request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        once: bool = False,
    ) -> Response:
        """A signed request; re-login once on 401; 4xx mapped to exceptions. `once`: never
        repeated blind after a 5xx or timeout (`Transport.send`, `MaybeAppliedError`)."""
        if not self.credentials.has_token:
            await self._ensure_login(self.credentials.generation, relogin=False)
        # Set once this request has re-logged in after a 401: another 401 then is final. The
        # first login does not count: a 401 just after it may be a logout elsewhere in between,
        # or a clock skew the 401's own `Date` header has just taught us to correct.
        fresh = False
        # A 401 after the fresh login is retried (twice at most) when its own `Date` taught
        # another skew than the one the attempt was signed with: the upstream's clock moved,
        # or an answer sent before the move was read after one sent after it.
        reskews = 0
        url = f"{self.base}{path}"
        fixed = dict(params or {})
        signed_with = [self.credentials.offset]

        def signed() -> dict[str, str]:
            # Called per attempt: the timestamp (and so the token) must be current each time.
            signed_with[0] = self.credentials.offset
            return {**fixed, **self.credentials.params()}

        while True:
            generation = self.credentials.generation
            resp = await self.transport.send(
                method,
                url,
                params=signed,
                json=json,
                headers={**(ACCEPT if json is None else JSONAPI_BODY), **(headers or {})},
                once=once,
            )
            if resp.status != 401:
                break
            if fresh and self.credentials.offset != signed_with[0] and reskews < 2:
                reskews += 1
                self.log.info("upstream.resigned", reason="clock skew changed", path=path)
                continue
            if fresh:
                raise AuthError(
                    f"the upstream refused a fresh session (401): {_error_detail(resp.body)}",
                    url=url,
                    status=401,
                    hint="check the account, and that this machine's clock is roughly right",
                )
            self.log.info("upstream.relogin", reason="401", path=path)
            await self._ensure_login(generation, relogin=True)
            fresh = True
        if resp.status == 403:
            raise ForbiddenError(
                f"not allowed: {_error_detail(resp.body)}",
                url=url,
                status=403,
                hint="the account's channels do not include this type",
            )
        if resp.status == 404:
            raise NotFoundError(f"not found: {_error_detail(resp.body)}", url=url, status=404)
        if resp.status >= 400:
            raise UpstreamError(
                f"request rejected: {_error_detail(resp.body)}", url=url, status=resp.status
            )
        return resp

    async def get_document(
        self, path: str, params: Mapping[str, str]
    ) -> tuple[Any, Mapping[str, str]]:
        """GET `path` signed and retried; the parsed JSON body and the response headers."""
        resp = await self.request("GET", path, params)
        return decode(resp.body, resp.url, resp.status), resp.headers

    # -- collections ---------------------------------------------------------------------------

    def include_for(self, rtype: ResourceType, paths: str | None = None) -> str:
        """`paths` (default: `rtype`'s include paths) less those the upstream refused on
        `rtype`'s route (`UpstreamProfile`)."""
        paths = rtype.include if paths is None else paths
        if self.profile is None:
            return paths
        refused = self.profile.refused_includes(rtype)
        if not refused:
            return paths
        return ",".join(
            p for p in paths.split(",") if p and p not in refused and p.split(".")[0] not in refused
        )

    async def _include_refused(
        self,
        exc: UpstreamError,
        rtype: ResourceType,
        mall_id: int | str | None,
        query: Mapping[str, str],
    ) -> bool:
        """Whether `exc` was a 400 refusing the request's include paths, now marked refused
        (`refused_include`), so the request can go again without them."""
        if exc.status != 400 or "include" not in query or "includ" not in str(exc).lower():
            return False
        return await self.refused_include(rtype, mall_id, query["include"])

    async def refused_include(
        self, rtype: ResourceType, mall_id: int | str | None, paths: str
    ) -> bool:
        """A listing with `include=<paths>` was refused with a 400: ask each path alone (one
        row) and mark the refused ones in the profile, so the request can go again without
        them. False when no path was refused (the 400 was about something else)."""
        from sync.channel.profile import Profiler, RouteProfile

        if self.profile is None:
            self.profile = UpstreamProfile()
        key = route_key(rtype)
        route = self.profile.routes.setdefault(key, RouteProfile(key))
        prober = Profiler(self)
        mall = int(mall_id) if mall_id is not None else None
        found = False
        for path in [p for p in paths.split(",") if p]:
            verdict = await prober.include(rtype, mall, path)
            route.includes[path] = verdict
            found = found or verdict == "refused"
        if found:
            self.log.warning(
                "upstream.include_refused",
                route=key,
                refused=sorted(p for p, v in route.includes.items() if v == "refused"),
                hint="the upstream refuses these include paths (400); the listing goes on "
                "without them and their linkage is not mirrored through include=",
            )
            if self.save_profile is not None:
                self.save_profile()
        return found

    def page_size(self, size: int | None = None) -> int:
        """The `page[size]` to ask: `size` (default `[upstream] page_size`), never more than
        the upstream proved it serves or accepts (`Paging`)."""
        return min(size or self.paging.asked, self.paging.size)

    async def get_listing(
        self, path: str, query: dict[str, str], headers: Mapping[str, str] | None = None
    ) -> Response:
        """GET one listing page; a 400 naming `page[size]` is asked again smaller (and the
        smaller size kept for every later request, `Paging.refused`)."""
        while True:
            try:
                return await self.request("GET", path, query, headers=headers)
            except UpstreamError as exc:
                if exc.status != 400 or "page" not in str(exc).lower():
                    raise
                asked = int(query.get("page[size]", "0") or 0)
                if asked > self.paging.asked or (asked > 1 and self.paging.refused()):
                    query = {**query, "page[size]": str(self.page_size(asked))}
                    continue
                raise

    async def walk(
        self, fetch: Callable[[int], Awaitable[Page]], start: int = 1
    ) -> AsyncIterator[Page]:
        """The page-number loop every listing walks through: pages from `start` until the
        stop rule of `Paging.more` (an empty page, or a short one `links.last` agrees is last;
        never a full page, whatever `links.last` says)."""
        number = start
        while True:
            page = await fetch(number)
            yield page
            if not self.paging.more(page):
                return
            number += 1

    def listing_params(
        self,
        rtype: ResourceType,
        number: int,
        *,
        scope_params: Mapping[str, str],
        params: Mapping[str, str],
        fields: Sequence[str] | None,
        include: bool,
        size: int | None,
    ) -> dict[str, str]:
        """Every parameter of one listing request, explicit."""
        out = {
            "page[size]": str(self.page_size(size)),
            "page[number]": str(number),
            "sort": "id",
        }
        if include and (paths := self.include_for(rtype)):
            out["include"] = paths
        if fields is not None:
            out[f"fields[{rtype.name}]"] = ",".join(fields)
        out.update(scope_params)
        out.update(params)
        return out

    async def list_page(
        self,
        rtype: ResourceType,
        number: int,
        *,
        mall_id: int | str | None = None,
        scope_params: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        fields: Sequence[str] | None = None,
        include: bool = True,
        size: int | None = None,
        conditional: bool = False,
        refusals: bool = True,
    ) -> Page:
        """One page of a type's collection (per mall for mall-scoped types).

        `conditional`: send `If-None-Match` with the ETag this exact listing (path and query,
        auth parameters aside) last answered with, when that answer held the whole result (a
        page not full): a 304 then means nothing in the result changed, and comes back as an
        empty page whose `not_modified` is set (the caller wrote those rows last time). A full
        page's ETag is never kept: a 304 for it would say nothing of the pages after it. Polls
        use it: an unchanged listing costs a request but no body."""
        path, query = self._listing(
            rtype, number, mall_id, scope_params, params, fields, include, size
        )
        key = etag = None
        if conditional:
            key = path + "?" + "&".join(f"{k}={v}" for k, v in sorted(query.items()))
            etag = self._etags.get(key)
        try:
            resp = await self.get_listing(
                path, query, headers={"If-None-Match": etag} if etag else None
            )
        except UpstreamError as exc:
            # `refusals=False`: a probe's own request (no fallback inside the fallback), and
            # the one retry after it (a path refused again is not asked about twice).
            if not refusals or not await self._include_refused(exc, rtype, mall_id, query):
                raise
            return await self.list_page(
                rtype,
                number,
                mall_id=mall_id,
                scope_params=scope_params,
                params=params,
                fields=fields,
                include=include,
                size=size,
                refusals=False,
            )
        if resp.status == 304 and etag is not None:
            return Page([], [], {}, number, number, self.api_version, not_modified=True)
        doc = decode_listing(resp.body, resp.url, resp.status)
        page = to_page(doc, number, resp.url, resp.status, self.api_version)
        if key is not None:
            tag = resp.headers.get("ETag")
            if tag and not self.paging.more(page, int(query["page[size]"])):
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
        it has acted on the page (`sync.jobs.mallincludes`): a 304 must never hide an unapplied change."""
        query = {
            "page[size]": str(self.page_size(size)),
            "page[number]": str(number),
            "sort": "id",
            "include": ",".join(rels),
            "fields[malls]": ",".join(rels),
            **{f"fields[{r}]": "updated_at" for r in rels},
        }
        resp = await self.get_listing(
            "/malls", query, headers={"If-None-Match": etag} if etag else None
        )
        if resp.status == 304 and etag is not None:
            return Page([], [], {}, number, number, self.api_version, not_modified=True), etag
        doc = decode_listing(resp.body, resp.url, resp.status)
        return to_page(doc, number, resp.url, resp.status, self.api_version), resp.headers.get(
            "ETag"
        )

    def _listing(
        self,
        rtype: ResourceType,
        number: int,
        mall_id: int | str | None,
        scope_params: Mapping[str, str] | None,
        params: Mapping[str, str] | None,
        fields: Sequence[str] | None,
        include: bool,
        size: int | None,
    ) -> tuple[str, dict[str, str]]:
        """(path, query) of one listing request (the auth parameters are added per attempt)."""
        query = self.listing_params(
            rtype,
            number,
            scope_params=scope_params or {},
            params=params or {},
            fields=fields,
            include=include,
            size=size,
        )
        if "include" in query and self.profile is not None:
            kept = self.include_for(rtype, query["include"])
            if kept:
                query["include"] = kept
            else:
                del query["include"]
        return rtype.list_path(mall_id), query

    async def list_response(
        self,
        rtype: ResourceType,
        number: int,
        *,
        mall_id: int | str | None = None,
        scope_params: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        fields: Sequence[str] | None = None,
        include: bool = True,
        size: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """One page of a type's collection as the raw answer, not parsed (the backfill parses
        pages in a worker process; see `sync.pipeline.staging.stage_listing`)."""
        path, query = self._listing(
            rtype, number, mall_id, scope_params, params, fields, include, size
        )
        try:
            return await self.get_listing(path, query, headers=headers)
        except UpstreamError as exc:
            if not await self._include_refused(exc, rtype, mall_id, query):
                raise
            path, query = self._listing(
                rtype, number, mall_id, scope_params, params, fields, include, size
            )
            return await self.get_listing(path, query, headers=headers)

    async def iter_pages(
        self,
        rtype: ResourceType,
        *,
        mall_id: int | str | None = None,
        scope_params: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        fields: Sequence[str] | None = None,
        include: bool = True,
        start: int = 1,
    ) -> AsyncIterator[Page]:
        """Pages in order from `start` until the stop rule (`walk`)."""

        def fetch(number: int) -> Awaitable[Page]:
            return self.list_page(
                rtype,
                number,
                mall_id=mall_id,
                scope_params=scope_params,
                params=params,
                fields=fields,
                include=include,
            )

        async for page in self.walk(fetch, start):
            yield page

    async def fetch_ids(
        self,
        rtype: ResourceType,
        ids: Sequence[str | int],
        *,
        mall_id: int | str | None = None,
        scope_params: Mapping[str, str] | None = None,
    ) -> Page:
        """Up to 100 resources by `filter[id]`, every page of the answer read (an upstream
        that serves fewer rows a page than asked answers in several): what is not in the
        result is not served in this scope, which a short first page alone never proves."""
        if len(ids) > MAX_IDS:
            raise ValueError(f"fetch_ids takes at most {MAX_IDS} ids, got {len(ids)}")
        if not ids:
            # `filter[id]=` might be read as "no filter", i.e. the whole collection.
            return Page([], [], {}, 1, 1, self.api_version)
        query = {"filter[id]": ",".join(str(i) for i in ids)}

        def fetch(number: int) -> Awaitable[Page]:
            return self.list_page(
                rtype,
                number,
                mall_id=mall_id,
                scope_params=scope_params,
                params=query,
                size=MAX_IDS,
            )

        pages = [page async for page in self.walk(fetch)]
        if len(pages) == 1:
            return pages[0]
        return Page(
            [r for p in pages for r in p.resources],
            [i for p in pages for i in p.included],
            pages[0].meta,
            1,
            1,
            self.api_version,
        )

    async def list_deletions(
        self,
        number: int,
        *,
        since: str | None = None,
        size: int | None = None,
        sort: str | None = "created_at",
    ) -> Page:
        """A page of the deletions feed, oldest first, from `since` (created_at, inclusive);
        `sort=None` asks for none (an upstream that does not honour it, `UpstreamProfile`)."""
        query = {
            "page[size]": str(self.page_size(size)),
            "page[number]": str(number),
        }
        if sort:
            query["sort"] = sort
        if since:
            query["filter[created_at][gte]"] = since
        resp = await self.get_listing("/deletions", query)
        doc = decode(resp.body, resp.url, resp.status)
        return to_page(doc, number, resp.url, resp.status, self.api_version)

    # -- hours ---------------------------------------------------------------------------------

    async def hours(self, mall_id: int | str, start: date, end: date) -> list[dict[str, Any]]:
        """The `hours` resources of a mall from `start` to `end` (inclusive bounds, no paging;
        the answer is application/json, still a `data` list)."""
        doc, _ = await self.get_document(
            f"/malls/{mall_id}/hours", {"from": start.isoformat(), "to": end.isoformat()}
        )
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list):
            raise BadResponseError(
                "hours without a `data` list", url=f"{self.base}/malls/{mall_id}/hours"
            )
        return [d for d in data if isinstance(d, dict)]

    async def current_hours(self, mall_id: int | str) -> Any:
        """The /current-hours body as sent: the spec does not describe its shape."""
        doc, _ = await self.get_document(f"/malls/{mall_id}/current-hours", {})
        return doc

    # -- webhooks ------------------------------------------------------------------------------

    async def list_webhooks(self) -> list[dict[str, Any]]:
        """Every subscription of this account, all pages."""

        async def fetch(number: int) -> Page:
            query = {
                "page[size]": str(self.page_size()),
                "page[number]": str(number),
                "sort": "id",
            }
            resp = await self.get_listing("/webhooks", query)
            doc = decode(resp.body, resp.url, resp.status)
            return to_page(doc, number, resp.url, resp.status, self.api_version)

        return [r async for page in self.walk(fetch) for r in page.resources]

    async def subscribe(self, callback_url: str, topic: str) -> dict[str, Any]:
        """POST /webhooks; returns the subscription resource ({} if the body has none)."""
        body = {
            "data": {
                "type": "webhooks",
                "attributes": {"callback_url": callback_url, "topic": topic},
            }
        }
        # Not idempotent: a timeout or a 5xx may follow a subscription that was made, and a
        # blind retry would make a second one (`Subscriptions.ensure` looks first).
        resp = await self.request("POST", "/webhooks", json=body, once=True)
        doc = decode(resp.body, resp.url, resp.status)
        data = doc.get("data") if isinstance(doc, dict) else None
        return data if isinstance(data, dict) else {}

    async def unsubscribe(self, webhook_id: str) -> None:
        """DELETE /webhooks/{id} (the spec does not show the path; this is the JSON:API one)."""
        await self.request("DELETE", f"/webhooks/{webhook_id}")
