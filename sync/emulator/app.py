"""The emulator's HTTP surface: every route of the Channel Content API spec, as an aiohttp app.

Collections are assembled from cached resource bytes (see `query`); headers follow the spec's
Versioning section; errors are JSON:API error objects. Choices where the spec is silent are
listed in the README's emulator section.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import date, timedelta
from email.utils import formatdate
from typing import Any
from urllib.parse import urlencode

import orjson
from aiohttp import web

from sync.emulator import shifting
from sync.emulator.auth import SKEW, Account, Accounts, AuthFailure
from sync.emulator.dataset import (
    MALL_MEMBERS,
    PER_MALL_ONLY,
    RELATIONSHIPS,
    TARGET,
    Dataset,
    iso_ms,
)
from sync.emulator.faults import Faults
from sync.emulator.pagecache import PageCache
from sync.emulator.query import (
    Query,
    QueryError,
    Selector,
    encode_plain,
    encode_resource,
    parse,
    path_of,
    related,
    resource_obj,
    variant,
    without_linkage,
)
from sync.emulator.records import Rec
from sync.emulator.traffic import NO_ROUTE, Traffic
from sync.emulator.webhooks import Dispatcher

API_VERSION = "v12.4.1"
JSONAPI = "application/vnd.api+json; charset=utf-8"
JSON = "application/json; charset=utf-8"
JSONAPI_TYPE = "application/vnd.api+json"
SCRIPTS = [
    {"type": "text/javascript", "content": "window.contentTracking = {channel: 'emulator'};"},
    {"type": "application/ld+json", "content": '{"@context": "https://schema.org"}'},
]


def own_scripts(type_name: str) -> list[dict[str, str]]:
    """What `changing_scripts` serves for a type: the shared tracking script plus two of its
    own, in an order of its own (a type whose name has an odd length lists them backwards)."""
    own = [
        SCRIPTS[0],
        {"type": "text/javascript", "content": f"window.contentType = '{type_name}';"},
        {
            "type": "application/ld+json",
            "content": orjson.dumps(
                {"@context": "https://schema.org", "@type": type_name}
            ).decode(),
        },
    ]
    return own[::-1] if len(type_name) % 2 else own


DATE_FIELDS = frozenset(
    {
        "created_at",
        "updated_at",
        "display_at",
        "start_at",
        "end_at",
        "trending_expired_at",
        "opening_date",
    }
)
EQUAL_FILTERS: dict[str, frozenset[str]] = {
    "deals": frozenset({"visibility"}),
    "events": frozenset({"is_active", "is_featured"}),
    "malls": frozenset({"name", "sort_name"}),
    "deletions": frozenset({"resource_type"}),
    "mall_messages": frozenset({"message_type"}),
}
BY_PATH = {path_of(t): t for t in [*RELATIONSHIPS]}
TOP_CHANNEL = {
    "articles": "editorial",
    "contacts": "mall",
    "deals": "deal",
    "events": "mall",
    "ifeatures": "mall",
    "job_listings": "mall",
    "mall_messages": "mall",
    "malls": "ALL",
    "deletions": "ALL",
}
MALL_CHANNEL: dict[str, tuple[str, ...]] = {
    "events": ("mall",),
    "mall_messages": ("mall",),
    "contacts": ("mall",),
    "ifeatures": ("mall",),
    "job_listings": ("mall",),
    "press_releases": ("mall",),
    "programs": ("mall",),
    "deals": ("deal",),
    "products": ("product",),
    "social_feeds": ("mall", "store"),
    "stores": ("deal", "store"),
}
#: The listings whose spec row documents `sort`: top-level, and under `/malls/{id}/` (all but
#: programs). Under `Hard.sort_undocumented_ignored` the others ignore it (rows in id order);
#: related routes (`RELATED_ROUTES`) serve their linkage's order whatever the switch.
SORTED = frozenset({"deals", "events", "malls"})
SORTED_IN_MALL = frozenset(MALL_CHANNEL) - {"programs"}
RELATED_ROUTES: dict[str, dict[str, str]] = {
    "articles": {
        "images": "editorial",
        "malls": "editorial",
        "products": "editorial",
        "tags": "editorial",
    },
    "deals": {"stores": "deal", "images": "deal", "tags": "deal"},
    "events": {"groups": "mall", "images": "mall"},
    "ifeatures": {"mall": "mall"},
    "job_listings": {"images": "mall", "store": "store"},
    "mall_messages": {"mall": "mall"},
}


def error(status: int, title: str, detail: str, parameter: str | None = None) -> web.Response:
    err: dict[str, Any] = {"status": str(status), "title": title, "detail": detail}
    if parameter:
        err["source"] = {"parameter": parameter}
    return web.Response(
        status=status,
        body=orjson.dumps({"errors": [err]}),
        content_type="application/vnd.api+json",
        charset="utf-8",
    )


OWN_PREFIX = "/_emulator/"


def route_of(request: web.Request) -> str:
    """The route pattern `request` matched, ids replaced: `/malls/{id}/stores`."""
    info = request.match_info
    collection = info.get("collection")
    if collection is not None:
        if collection not in BY_PATH:
            return NO_ROUTE
        pattern = f"/{collection}"
        if "id" in info:
            pattern += "/{id}"
        if "rel" in info:
            pattern += f"/{info['rel']}"
        return pattern
    resource = getattr(info.route, "resource", None)
    return resource.canonical if resource is not None else NO_ROUTE


class EmulatorApp:
    """Request handlers over one data set, account store, dispatcher and fault switches."""

    def __init__(
        self, data: Dataset, accounts: Accounts, dispatcher: Dispatcher, faults: Faults
    ) -> None:
        self.data = data
        self.hard = data.hard  # the hard readings (`sync.emulator.hard`), shared with the data
        self.accounts = accounts
        self.dispatcher = dispatcher
        self.faults = faults
        self.selector = Selector(data)
        self.base = ""
        self.scripts_blob = orjson.dumps(SCRIPTS)  # every type's, unless `type_scripts` says
        #: A type's own `meta.scripts` bytes (`set_scripts`, `changing_scripts`); empty by
        #: default, so every response serves `scripts_blob` at the cost of one dict lookup.
        self.type_scripts: dict[str, bytes] = {}
        self._changing_scripts = False
        self.requests = 0  # requests served in all (`traffic` has them per route and second)
        self.traffic = Traffic()  # requests served per route and per second
        self.strict_content_type = True  # 415 for a JSON:API body of another type
        self.pages = PageCache()  # off until given a budget (`ccsync emulator --page-cache-mb`)
        self._mall_includes = False
        self.member_pages = 0  # `/malls` answers that included members (served or cached)

    @property
    def mall_includes(self) -> bool:
        """Whether `GET /malls` (and `/malls/{id}`) may include the members that only a mall
        lists (`stores`, `products`, `programs`, `social_feeds`, `press_releases`): off by default, the hard case, since the spec says valid include names
        are "not shown"; `ccsync emulator --mall-includes` (or setting this) serves them."""
        return self._mall_includes

    @mall_includes.setter
    def mall_includes(self, value: bool) -> None:
        self._mall_includes = value
        self.pages.clear()  # cached pages were answered under the other setting

    @property
    def changing_scripts(self) -> bool:
        """Whether each type serves its own `meta.scripts` (`own_scripts`), which
        `set_scripts` changes at run time; off by default (one list for every response).
        Switching clears what `set_scripts` set."""
        return self._changing_scripts

    @changing_scripts.setter
    def changing_scripts(self, value: bool) -> None:
        self._changing_scripts = value
        types = BY_PATH.values() if value else ()
        self.type_scripts = {t: orjson.dumps(own_scripts(t)) for t in types}
        self.pages.clear()  # cached pages carry the other scripts

    def scripts_of(self, type_name: str) -> bytes:
        """The `meta.scripts` bytes a response whose primary data is `type_name` carries."""
        return self.type_scripts.get(type_name, self.scripts_blob)

    def set_scripts(self, type_name: str, scripts: list[Any]) -> None:
        """Serve `scripts` (as given, valid or not) as `type_name`'s `meta.scripts` from now on."""
        self.type_scripts[type_name] = orjson.dumps(scripts)
        self.pages.clear()

    def now(self) -> float:
        return time.time() + self.faults.clock_offset

    # -- middleware ----------------------------------------------------------------------------

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        t0 = time.perf_counter()
        if request.path.startswith(OWN_PREFIX):  # the emulator's own routes: no faults, uncounted
            return await handler(request)
        self.requests += 1
        self.traffic.count(route_of(request), time.time())
        self.data.sync_hard()  # switches assigned since the last request take effect
        f = self.faults
        if self.hard.account_faults or not request.path.startswith("/accounts"):
            if f.latency > 0:
                await asyncio.sleep(f.latency)
            if f.roll(f.stall_rate, "stalled"):
                await asyncio.sleep(f.stall_seconds)
            if f.roll(f.drop_rate, "dropped"):
                if request.transport is not None:
                    request.transport.close()
                raise web.HTTPInternalServerError()
            if f.roll(f.rate_429, "http_429"):
                resp: web.StreamResponse = error(429, "Too Many Requests", "rate limit exceeded")
                resp.headers["Retry-After"] = str(f.retry_after)
                return self._headers(resp, t0)
            if f.roll(f.error_rate, "http_5xx"):
                status = f.rng.choice(f.error_statuses)
                return self._headers(error(status, "Server Error", "injected fault"), t0)
        try:
            resp = await handler(request)
        except web.HTTPNotFound:
            resp = error(404, "Not Found", f"no route {request.path}")
        except web.HTTPMethodNotAllowed:
            resp = error(
                405, "Method Not Allowed", f"{request.method} is not allowed on {request.path}"
            )
        return self._headers(resp, t0)

    def _headers(self, resp: web.StreamResponse, t0: float) -> web.StreamResponse:
        h = resp.headers
        h["X-API-Version"] = API_VERSION
        h["Cache-Control"] = "max-age=0, private, must-revalidate"
        h["X-Request-Id"] = uuid.uuid4().hex
        h["X-Runtime"] = f"{time.perf_counter() - t0:.6f}"
        h["Vary"] = "Origin"
        h["Date"] = formatdate(self.now(), usegmt=True)
        return resp

    # -- helpers -------------------------------------------------------------------------------

    def _auth(self, request: web.Request, channels: tuple[str, ...] = ("ALL",)) -> Account:
        self.accounts.clock = self.now
        try:
            account = self.accounts.check(request.query, self.hard.signing_window or SKEW)
        except AuthFailure as exc:
            raise _Reply(error(401, "Unauthorized", str(exc))) from None
        if "ALL" not in channels and not (account.channels & set(channels)):
            raise _Reply(
                error(
                    403, "Forbidden", f"this account's channels do not include {'/'.join(channels)}"
                )
            )
        return account

    def _public_query(self, request: web.Request, **override: str) -> str:
        q = {k: v for k, v in request.query.items() if not k.startswith("auth_")}
        q.update(override)
        return urlencode(q, safe="[],")

    def _url(self, request: web.Request, **override: str) -> str:
        qs = self._public_query(request, **override)
        return f"{self.base}{request.path}" + (f"?{qs}" if qs else "")

    def _rec(self, type_name: str, raw_id: str) -> Rec:
        rid = int(raw_id) if raw_id.isdigit() else -1
        rec = self.data.by_type.get(type_name, {}).get(rid)
        if rec is None:
            raise _Reply(error(404, "Not Found", f"no {type_name} with id {raw_id}"))
        return rec

    def _parse(
        self,
        type_name: str,
        request: web.Request,
        defaults: dict[str, str] | None = None,
        *,
        sortable: bool = True,
    ) -> Query:
        """The query of `request` for `type_name`, or a 400 (`sortable`: whether the route's
        spec row documents `sort`)."""
        try:
            q = parse(
                type_name,
                request.query,
                date_fields=DATE_FIELDS,
                equal_filters=EQUAL_FILTERS.get(type_name, frozenset()),
                default_equals=defaults,
                page_bound=self.hard.page_bound,
                refuse_above=self.hard.page_bound_refuse,
            )
        except QueryError as exc:
            raise _Reply(error(400, "Bad Request", str(exc), exc.parameter)) from None
        allowed = self.hard.includes_allowed
        if allowed is not None and q.include:
            for path in q.include:
                if path.split(".")[0] not in allowed:
                    raise _Reply(
                        error(
                            400,
                            "Bad Request",
                            f"{path}: including {path.split('.')[0]} is not supported",
                            "include",
                        )
                    )
        if not sortable and self.hard.sort_undocumented_ignored:
            q = replace(q, sort=(("id", False),))
        hidden = self._links_only()
        if hidden and q.include:  # served with links only, and nothing included for them
            q = replace(q, include=without_linkage(type_name, q.include, hidden))
        members = [p for p in q.include if p.split(".")[0] in PER_MALL_ONLY]
        if type_name == "malls" and members and self._mall_includes:
            self.member_pages += 1
        elif type_name == "malls" and members:
            raise _Reply(
                error(
                    400,
                    "Bad Request",
                    f"{members[0]}: {members[0].split('.')[0]} of malls cannot be included",
                    "include",
                )
            )
        return q

    def _links_only(self) -> frozenset[str]:
        """A mall's relationships served without linkage whatever `include` asks."""
        if self.hard.no_include_linkage:
            return MALL_MEMBERS
        if self.hard.route_memberships:
            return frozenset({"contacts", "deals"})
        return frozenset()

    def _included(self, recs: list[Rec], q: Query) -> list[bytes]:
        """The `included` members: the resources every include path reaches (`images`,
        `images.tags`), once each; an included resource carries the linkage of the paths that
        continue through it (an image reached by `images.tags` serves its tags' linkage)."""
        seen: set[tuple[str, int]] = set()
        out: list[bytes] = []
        variants: dict[str, tuple[tuple[str, ...] | None, str, tuple[str, ...]]] = {}
        nested: dict[str, list[str]] = {}
        paths = [p.split(".") for p in q.include]
        for path in paths:
            if len(path) > 1:
                owner = TARGET.get(path[0], path[0])
                nested.setdefault(owner, []).append(path[1])
        for rec in recs:
            for path in paths:
                level = [rec]
                for name in path:
                    level = [o for r in level for o in related(self.data, r, name)]
                    for other in level:
                        key = (other.type, other.id)
                        if key in seen:
                            continue
                        seen.add(key)
                        v = variants.get(other.type)
                        if v is None:  # once per included type and page, not per resource
                            fields = q.fields_for(other.type)
                            inc = tuple(dict.fromkeys(nested.get(other.type, ())))
                            v = variants[other.type] = (fields, variant(inc, fields), inc)
                        out.append(
                            encode_resource(
                                self.data, self.base, other, v[2], v[0], v[1], self.data.stamp_forms
                            )
                        )
        return out

    def _document(
        self, request: web.Request, recs: list[Rec], q: Query, *, total: int | None, type_name: str
    ) -> web.Response:
        fields = q.fields_for(type_name)
        top = tuple(dict.fromkeys(p.split(".")[0] for p in q.include))
        key = variant(top, fields)
        if not top and fields is None and not self.data.stamp_forms:
            blobs = encode_plain(self.data, self.base, recs)
        else:
            blobs = [
                encode_resource(self.data, self.base, r, top, fields, key, self.data.stamp_forms)
                for r in recs
            ]
        parts = [b'{"data":[', b",".join(blobs), b"]"]
        if q.include:
            parts += [b',"included":[', b",".join(self._included(recs, q)), b"]"]
        links: dict[str, str] = {"self": self._url(request)}
        if total is not None:
            last = max(1, -(-total // q.size))
            links["first"] = self._url(request, **{"page[number]": "1", "page[size]": str(q.size)})
            links["last"] = self._url(
                request, **{"page[number]": str(last), "page[size]": str(q.size)}
            )
        parts += [
            b',"links":',
            orjson.dumps(links),
            b',"meta":{"scripts":',
            self.type_scripts.get(type_name, self.scripts_blob),
            b"}}",
        ]
        return self._etagged(request, b"".join(parts), type_name)

    def _etagged(
        self, request: web.Request, body: bytes, type_name: str, content_type: str = JSONAPI
    ) -> web.Response:
        # A hash of the body itself: a listing whose included resources changed (an image
        # edited, its owner untouched) gets a new ETag too, so a 304 is never a stale answer.
        tag = f'W/"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
        if request.headers.get("If-None-Match") == tag:
            return web.Response(status=304, headers={"ETag": tag})
        return web.Response(body=body, headers={"ETag": tag, "Content-Type": content_type})

    # -- handlers ------------------------------------------------------------------------------

    async def collection(self, request: web.Request) -> web.StreamResponse:
        type_name = BY_PATH.get(request.match_info["collection"])
        if type_name is None or type_name not in TOP_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        self._auth(request, (TOP_CHANNEL[type_name],))
        defaults = {"visibility": "Public"} if type_name == "deals" else None
        return self._list(request, type_name, None, defaults)

    def _list(
        self,
        request: web.Request,
        type_name: str,
        mall: int | None,
        defaults: dict[str, str] | None,
    ) -> web.Response:
        key = generation = None
        sortable = type_name in (SORTED if mall is None else SORTED_IN_MALL)
        if self.hard.shifting_listings:
            shifting.before_page(
                self.data,
                self.selector,
                type_name,
                mall,
                self._parse(type_name, request, defaults, sortable=sortable),
            )
        if self.pages.enabled:
            key, generation = (request.path, self._public_query(request)), self.data.generation
            body = self.pages.get(key, generation)
            if body is not None:
                return self._etagged(request, body, type_name)
        q = self._parse(type_name, request, defaults, sortable=sortable)
        ids = self.selector.select(type_name, mall, q)
        start = (q.number - 1) * q.size
        recs = self.data.by_type[type_name]
        page = [recs[i] for i in ids[start : start + q.size]]
        stale = self.faults.roll(self.faults.stale_rate, "stale_page")
        if stale:  # a lagging replica answers: older copies, never cached
            page = [self.data.older(r) for r in page]
        resp = self._document(request, page, q, total=len(ids), type_name=type_name)
        if key is not None and generation is not None and resp.status == 200 and not stale:
            assert isinstance(resp.body, bytes)
            self.pages.put(key, resp.body, generation)
        return resp

    async def single(self, request: web.Request) -> web.StreamResponse:
        type_name = BY_PATH.get(request.match_info["collection"])
        if type_name is None or type_name not in TOP_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        self._auth(request, (TOP_CHANNEL[type_name],))
        rec = self._rec(type_name, request.match_info["id"])
        q = self._parse(type_name, request)
        top = tuple(dict.fromkeys(p.split(".")[0] for p in q.include))
        body = b'{"data":' + encode_resource(
            self.data, self.base, rec, top, q.fields_for(type_name), forms=self.data.stamp_forms
        )
        if q.include:
            body += b',"included":[' + b",".join(self._included([rec], q)) + b"]"
        body += b',"links":' + orjson.dumps({"self": self._url(request)})
        body += b',"meta":{"scripts":' + self.scripts_of(type_name) + b"}}"
        return self._etagged(request, body, type_name)

    async def related_route(self, request: web.Request) -> web.StreamResponse:
        type_name = BY_PATH.get(request.match_info["collection"])
        name = request.match_info["rel"].replace("-", "_")
        if type_name == "malls":
            return await self.mall_route(request)
        routes = RELATED_ROUTES.get(type_name or "", {})
        if type_name is None or name not in routes:
            return error(404, "Not Found", f"no route {request.path}")
        self._auth(request, (routes[name],))
        rec = self._rec(type_name, request.match_info["id"])
        others = related(self.data, rec, name)
        target = TARGET.get(name, name)
        q = self._parse(target, request)
        if name in ("mall", "store"):
            body = b'{"data":' + (
                encode_resource(
                    self.data, self.base, others[0], (), None, forms=self.data.stamp_forms
                )
                if others
                else b"null"
            )
            body += b',"meta":{"scripts":' + self.scripts_of(target) + b"}}"
            return self._etagged(request, body, target)
        start = (q.number - 1) * q.size
        return self._document(
            request, others[start : start + q.size], q, total=len(others), type_name=target
        )

    async def mall_route(self, request: web.Request) -> web.StreamResponse:
        sub = request.match_info["rel"]
        if sub == "hours":
            return await self.hours(request)
        if sub == "current-hours":
            return await self.current_hours(request)
        type_name = BY_PATH.get(sub)
        if type_name is None or type_name not in MALL_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        self._auth(request, MALL_CHANNEL[type_name])
        mall = self._rec("malls", request.match_info["id"])
        defaults = {"visibility": "Public"} if type_name == "deals" else None
        return self._list(request, type_name, mall.id, defaults)

    def _day(self, request: web.Request, name: str, default: date) -> date:
        raw = request.query.get(name)
        if raw is None:
            return default
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise _Reply(error(400, "Bad Request", f"{name} must be YYYY-MM-DD", name)) from None

    async def hours(self, request: web.Request) -> web.StreamResponse:
        self._auth(request, ("mall",))
        mall = self._rec("malls", request.match_info["id"])
        today = date.fromtimestamp(self.now())
        start = self._day(request, "from", today)
        end = self._day(request, "to", start + timedelta(days=6))
        if end < start or (end - start).days > 366:
            return error(
                400, "Bad Request", "to must be on or after from, at most 366 days later", "to"
            )
        body = orjson.dumps({"data": self.data.hours(mall.id, start, end)})
        return web.Response(body=body, headers={"Content-Type": JSON})

    async def current_hours(self, request: web.Request) -> web.StreamResponse:
        self._auth(request, ("mall",))
        mall = self._rec("malls", request.match_info["id"])
        return web.Response(
            body=orjson.dumps(self.data.current_hours(mall.id)), headers={"Content-Type": JSON}
        )

    # accounts
    async def _account_body(self, request: web.Request) -> dict[str, Any]:
        """The `data.attributes` of a JSON:API request body (account creation, login, webhook
        subscription). JSON:API requires its media type for request bodies: another content
        type is 415, unless the emulator runs with `strict_content_type` off."""
        if self.strict_content_type and request.content_type != JSONAPI_TYPE:
            raise _Reply(
                error(
                    415,
                    "Unsupported Media Type",
                    f"a JSON:API request body must be sent as {JSONAPI_TYPE}, "
                    f"not {request.content_type or 'none'}",
                )
            )
        try:
            doc = orjson.loads(await request.read())
            attrs = doc["data"]["attributes"]
            if not isinstance(attrs, dict):
                raise TypeError
            return attrs
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise _Reply(
                error(400, "Bad Request", "body must be {data: {type, attributes: {...}}}")
            ) from None

    def _account_doc(self, account: Account) -> web.Response:
        attrs = {
            "email": account.email,
            "authentication_token": account.token,
            "created_at": account.created_at,
            "updated_at": account.created_at,
            "confirmed_at": None,
            "token_expired_at": None,
            "properties": account.properties,
        }
        body = {
            "data": {
                "id": str(account.id),
                "type": "accounts",
                "links": {"self": f"{self.base}/accounts/{account.id}"},
                "attributes": attrs,
            }
        }
        return web.Response(status=201, body=orjson.dumps(body), headers={"Content-Type": JSON})

    async def create_account(self, request: web.Request) -> web.StreamResponse:
        attrs = await self._account_body(request)
        email, password = attrs.get("email"), attrs.get("password")
        if not isinstance(email, str) or not email or not isinstance(password, str) or not password:
            return error(422, "Unprocessable Entity", "email and password are required")
        if email in self.accounts.by_email:
            return error(422, "Unprocessable Entity", "email has already been taken")
        props = attrs.get("properties") if isinstance(attrs.get("properties"), dict) else None
        return self._account_doc(
            self.accounts.create(email, password, props, stamp=iso_ms(self.now()))
        )

    async def login(self, request: web.Request) -> web.StreamResponse:
        attrs = await self._account_body(request)
        account = self.accounts.login(str(attrs.get("email", "")), str(attrs.get("password", "")))
        if account is None:
            return error(401, "Unauthorized", "invalid email or password")
        return self._account_doc(account)

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """DELETE /accounts/logout with the spec's body {account, auth_id, auth_token,
        auth_timestamp, format}: the signature is read from the body (not the query); `account`
        names the signed account by `email` or `id` (a `password` in it must be right). Ends every
        session of the token: the account's token is replaced."""
        shape = "body must be {account: {email, ...}, auth_id, auth_token, auth_timestamp, format}"
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return error(400, "Bad Request", shape)
        if not isinstance(body, dict):
            return error(400, "Bad Request", shape)
        missing = [
            k
            for k in ("account", "auth_id", "auth_token", "auth_timestamp", "format")
            if k not in body
        ]
        if missing:
            return error(400, "Bad Request", f"{shape}; missing {', '.join(missing)}", missing[0])
        creds, fmt = body["account"], body["format"]
        if not isinstance(creds, dict) or not isinstance(fmt, str):
            return error(400, "Bad Request", f"{shape}; account is an object, format a string")
        self.accounts.clock = self.now
        try:
            account = self.accounts.check(
                {k: str(body[k]) for k in ("auth_id", "auth_token", "auth_timestamp")},
                self.hard.signing_window or SKEW,
            )
        except AuthFailure as exc:
            return error(401, "Unauthorized", str(exc))
        named = str(creds.get("email", creds.get("id", "")))
        if named not in (account.email, str(account.id)) or (
            "password" in creds and creds["password"] != account.password
        ):
            return error(401, "Unauthorized", "account does not match the signed auth_id")
        self.accounts.logout(account)
        resp = web.Response(status=204)
        resp.set_cookie("_session_id", uuid.uuid4().hex, httponly=True, path="/")
        return resp

    # the emulator's own routes
    async def traffic_route(self, request: web.Request) -> web.StreamResponse:
        """`GET /_emulator/requests`: requests served per route and per second; `DELETE`
        resets the counts."""
        if request.method == "DELETE":
            self.traffic.reset()
            return web.Response(status=204)
        return web.Response(
            body=orjson.dumps(self.traffic.as_json()), headers={"Content-Type": JSON}
        )

    async def settings_route(self, request: web.Request) -> web.StreamResponse:
        """`PATCH /_emulator/settings`: switch faults and behaviour of a running emulator from
        outside its process (`{"latency": 0.05, "mall_includes": true}`, the hard readings as
        `{"hard": {"multi_mall": true, "page_bound": 30}}`); answers them all. The benchmarks
        backfill fast, then measure the daemon under latency."""
        numbers = {
            "latency",
            "error_rate",
            "rate_429",
            "stall_rate",
            "stall_seconds",
            "drop_rate",
            "stale_rate",
            "webhook_loss_rate",
            "webhook_duplicate_rate",
        }
        if request.method == "PATCH":
            try:
                body = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return error(400, "Bad Request", "the body is not JSON")
            if not isinstance(body, dict):
                return error(400, "Bad Request", "the body must be a JSON object")
            hard = body.get("hard", {})
            if not isinstance(hard, dict):
                return error(400, "Bad Request", "hard must be an object of switch: value")
            try:
                self.hard.update(hard)
            except ValueError as exc:
                return error(400, "Bad Request", str(exc))
            if hard:
                self.data.sync_hard()
                self.pages.clear()  # cached pages were answered under the other setting
                if self.hard.changing_scripts != self.changing_scripts:
                    self.changing_scripts = self.hard.changing_scripts
            for key, value in body.items():
                if key == "hard":
                    continue
                if key == "mall_includes" and isinstance(value, bool):
                    self.mall_includes = value
                elif key == "changing_scripts" and isinstance(value, bool):
                    self.changing_scripts = value
                elif key in numbers and isinstance(value, int | float) and value >= 0:
                    setattr(self.faults, key, float(value))
                else:
                    return error(400, "Bad Request", f"unknown setting or bad value: {key}")
        now: dict[str, Any] = {k: getattr(self.faults, k) for k in sorted(numbers)}
        now["mall_includes"] = self.mall_includes
        now["hard"] = self.hard.as_dict()
        now["changing_scripts"] = self.changing_scripts
        return web.Response(body=orjson.dumps(now), headers={"Content-Type": JSON})

    async def scripts_route(self, request: web.Request) -> web.StreamResponse:
        """`/_emulator/scripts/{type}`: `GET` the `meta.scripts` the type's responses carry,
        `PUT` a JSON array to serve instead from now on (`set_scripts`)."""
        type_name = request.match_info["type"].replace("-", "_")
        if type_name not in self.data.by_type:
            return error(404, "Not Found", f"no resource type {type_name!r}")
        if request.method == "PUT":
            try:
                body = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return error(400, "Bad Request", "the body is not JSON")
            if not isinstance(body, list):
                return error(400, "Bad Request", "the body must be a JSON array")
            self.set_scripts(type_name, body)
        return web.Response(body=self.scripts_of(type_name), headers={"Content-Type": JSON})

    async def control_route(self, request: web.Request) -> web.StreamResponse:
        """`/_emulator/resources/{type}[/{id}]`: change the data set of a running emulator from
        outside its process, as the upstream's own editors would (notices, the deletions feed
        and `updated_at` follow as for any mutation): `POST` creates (body `{"attributes":
        {...}, "mall_id": 7}`, both optional), `PATCH` updates (`{"attributes": {...}}`, or
        `{"silent": true, ...}` to keep `updated_at` and send no notice, or `{"move": {"from": 3,
        "to": 5}}` to move a mall-scoped row silently: `Dataset.move`), `DELETE` deletes. For
        users' own integration tests; the emulator binds loopback only."""
        type_name = request.match_info["type"].replace("-", "_")
        if type_name not in self.data.by_type or type_name == "deletions":
            return error(404, "Not Found", f"no resource type {type_name!r}")
        raw_id = request.match_info.get("id")
        rid: int | None = None
        if raw_id is not None:
            if not raw_id.isdigit() or int(raw_id) not in self.data.by_type[type_name]:
                return error(404, "Not Found", f"no {type_name} {raw_id}")
            rid = int(raw_id)
        body: dict[str, Any] = {}
        if request.method in ("POST", "PATCH") and request.can_read_body:
            try:
                parsed = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return error(400, "Bad Request", "the body is not JSON")
            if not isinstance(parsed, dict):
                return error(400, "Bad Request", "the body must be a JSON object")
            body = parsed
        attrs = body.get("attributes")
        if attrs is not None and not isinstance(attrs, dict):
            return error(400, "Bad Request", "attributes must be an object")
        if request.method == "POST" and rid is None:
            mall = body.get("mall_id")
            if mall is not None and (
                not str(mall).isdigit() or int(mall) not in self.data.by_type["malls"]
            ):
                return error(422, "Unprocessable Entity", f"no mall {mall}")
            try:
                rec = self.data.create(type_name, attrs, int(mall) if mall is not None else None)
            except KeyError:
                return error(422, "Unprocessable Entity", f"{type_name} cannot be created")
            status, rid = 201, rec.id
        elif request.method == "PATCH" and rid is not None and "move" in body:
            move = body["move"]
            if not isinstance(move, dict) or not all(
                isinstance(move.get(k), int) and not isinstance(move.get(k), bool)
                for k in ("from", "to")
            ):
                return error(400, "Bad Request", 'move must be {"from": mall id, "to": mall id}')
            try:
                self.data.move(type_name, rid, move["from"], move["to"])
            except ValueError as exc:
                return error(422, "Unprocessable Entity", str(exc))
            status = 200
        elif request.method == "PATCH" and rid is not None:
            if body.get("silent"):
                self.data.silent_update(type_name, rid, attrs, None, None)
            else:
                self.data.update(type_name, rid, attrs)
            status = 200
        elif request.method == "DELETE" and rid is not None:
            self.data.delete(type_name, rid)
            return web.Response(status=204)
        else:
            return error(405, "Method Not Allowed", f"{request.method} {request.path}")
        doc = {
            "data": resource_obj(self.data, self.base, self.data.by_type[type_name][rid], (), None)
        }
        return web.Response(status=status, body=orjson.dumps(doc), headers={"Content-Type": JSON})

    # webhooks
    def _hook_obj(self, sub: Any) -> dict[str, Any]:
        return {
            "id": str(sub.id),
            "type": "webhooks",
            "links": {"self": f"{self.base}/webhooks/{sub.id}"},
            "attributes": {"callback_url": sub.callback_url, "topic": sub.topic},
        }

    async def create_webhook(self, request: web.Request) -> web.StreamResponse:
        account = self._auth(request)
        attrs = await self._account_body(request)
        url, topic = attrs.get("callback_url"), attrs.get("topic")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return error(422, "Unprocessable Entity", "callback_url must be an http(s) URL")
        if not isinstance(topic, str) or topic not in self.data.by_type:
            return error(422, "Unprocessable Entity", f"unknown topic {topic!r}")
        sub = self.dispatcher.subscribe(account.id, url, topic)
        body = {"data": self._hook_obj(sub), "meta": {"scripts": SCRIPTS}}
        return web.Response(status=201, body=orjson.dumps(body), headers={"Content-Type": JSONAPI})

    async def list_webhooks(self, request: web.Request) -> web.StreamResponse:
        account = self._auth(request)
        q = self._parse("webhooks", request)
        mine = [s for s in self.dispatcher.subs.values() if s.account_id == account.id]
        start = (q.number - 1) * q.size
        last = max(1, -(-len(mine) // q.size))
        body = {
            "data": [self._hook_obj(s) for s in mine[start : start + q.size]],
            "links": {
                "self": self._url(request),
                "first": self._url(request, **{"page[number]": "1", "page[size]": str(q.size)}),
                "last": self._url(
                    request, **{"page[number]": str(last), "page[size]": str(q.size)}
                ),
            },
            "meta": {"scripts": SCRIPTS},
        }
        return web.Response(body=orjson.dumps(body), headers={"Content-Type": JSONAPI})

    async def delete_webhook(self, request: web.Request) -> web.StreamResponse:
        account = self._auth(request)
        raw = request.match_info["id"]
        sub = self.dispatcher.subs.get(int(raw)) if raw.isdigit() else None
        if sub is None or sub.account_id != account.id:
            return error(404, "Not Found", f"no webhook {raw}")
        self.dispatcher.unsubscribe(sub.id)
        return web.Response(status=204)


class _Reply(Exception):
    """Carries a finished error response out of a helper."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


@web.middleware
async def _replies(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except _Reply as reply:
        return reply.response


def make_app(emu: EmulatorApp, management: Any = None) -> web.Application:
    """The aiohttp application serving the spec's routes (and the management API's, if given)."""
    app = web.Application(middlewares=[emu.middleware, _replies])
    if management is not None:
        management.routes(app)  # before the generic /{collection}/... routes below
    r = app.router
    r.add_get(f"{OWN_PREFIX}requests", emu.traffic_route)  # before /{collection}/{id}
    r.add_delete(f"{OWN_PREFIX}requests", emu.traffic_route)
    r.add_get(f"{OWN_PREFIX}settings", emu.settings_route)
    r.add_patch(f"{OWN_PREFIX}settings", emu.settings_route)
    r.add_get(f"{OWN_PREFIX}scripts/{{type}}", emu.scripts_route)
    r.add_put(f"{OWN_PREFIX}scripts/{{type}}", emu.scripts_route)
    r.add_post(f"{OWN_PREFIX}resources/{{type}}", emu.control_route)
    r.add_patch(f"{OWN_PREFIX}resources/{{type}}/{{id}}", emu.control_route)
    r.add_delete(f"{OWN_PREFIX}resources/{{type}}/{{id}}", emu.control_route)
    r.add_post("/accounts", emu.create_account)
    r.add_post("/accounts/login", emu.login)
    r.add_delete("/accounts/logout", emu.logout)
    r.add_post("/webhooks", emu.create_webhook)
    r.add_get("/webhooks", emu.list_webhooks)
    r.add_delete("/webhooks/{id}", emu.delete_webhook)
    r.add_get("/{collection}", emu.collection)
    r.add_get("/{collection}/{id}", emu.single)
    r.add_get("/{collection}/{id}/{rel}", emu.related_route)
    return app


def resource_dict(emu: EmulatorApp, rec: Rec, include: tuple[str, ...] = ()) -> dict[str, Any]:
    return resource_obj(emu.data, emu.base, rec, include, None)
