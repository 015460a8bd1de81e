"""The emulator's HTTP state and what every handler asks of a request: `EmulatorApp`.

One `EmulatorApp` holds what the handlers share: the data set, accounts, webhook dispatcher,
fault switches, the query selector, the page cache, the served `meta.scripts`, the request
counts. Its methods are the steps every handler takes: check the signature and channel, parse the
JSON:API query (400 for anything off), find the row a path names (404), read a request body.
The handlers themselves live by concern (`listings`, `hours`, `accounts`, `subscriptions`,
`admin`), the route table in `routes`, the per-request faults in `middleware`. Choices where the
spec is silent are listed in the README's emulator section.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import orjson
from aiohttp import web

from sync.emulator.auth import SKEW, Account, Accounts, AuthFailure
from sync.emulator.dataset import Dataset
from sync.emulator.faults import Faults
from sync.emulator.pagecache import PageCache
from sync.emulator.query import Query, QueryError, Selector, parse, without_linkage
from sync.emulator.records import Rec
from sync.emulator.responses import JSONAPI_TYPE, SCRIPTS, Reply, error, own_scripts
from sync.emulator.spec import (
    BY_PATH,
    DATE_FIELDS,
    DEAL_STORE,
    EQUAL_FILTERS,
    MALL_MEMBERS,
    PER_MALL_ONLY,
)
from sync.emulator.traffic import Traffic
from sync.emulator.webhooks import Dispatcher


class EmulatorApp:
    """The state request handlers share over one data set, account store, dispatcher and faults."""

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
        lists (`stores`, `products`, `programs`, `social_feeds`, `press_releases`): off by
        default, the hard case, since the spec says valid include names are "not shown";
        `ccsync emulator --mall-includes` (or setting this) serves them."""
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

    # -- what every handler asks of a request --------------------------------------------------

    def auth(self, request: web.Request, channels: tuple[str, ...] = ("ALL",)) -> Account:
        """The account that signed `request` (401 else), if its channels allow `channels` (403)."""
        self.accounts.clock = self.now
        try:
            account = self.accounts.check(request.query, self.hard.signing_window or SKEW)
        except AuthFailure as exc:
            raise Reply(error(401, "Unauthorized", str(exc))) from None
        if "ALL" not in channels and not (account.channels & set(channels)):
            why = f"this account's channels do not include {'/'.join(channels)}"
            if self.hard.forbidden_as_not_found:
                raise Reply(error(404, "Not Found", why))
            raise Reply(error(403, "Forbidden", why))
        return account

    def public_query(self, request: web.Request, **override: str) -> str:
        q = {k: v for k, v in request.query.items() if not k.startswith("auth_")}
        q.update(override)
        return urlencode(q, safe="[],")

    def url(self, request: web.Request, **override: str) -> str:
        qs = self.public_query(request, **override)
        return f"{self.base}{request.path}" + (f"?{qs}" if qs else "")

    def page_links(
        self, request: web.Request, total: int, size: int, number: int = 1
    ) -> dict[str, str | None]:
        """`links` of page `number` of a listing of `total` rows: self, first, last (and
        next, prev, null at the ends, with `Hard.past_end_404`)."""
        last = max(1, -(-total // size))
        out: dict[str, str | None] = {
            "self": self.url(request),
            "first": self.url(request, **{"page[number]": "1", "page[size]": str(size)}),
            "last": self.url(request, **{"page[number]": str(last), "page[size]": str(size)}),
        }
        if self.hard.past_end_404:
            at = {"page[size]": str(size)}
            out["next"] = self.url(request, **at, **{"page[number]": str(number + 1)})
            out["prev"] = self.url(request, **at, **{"page[number]": str(number - 1)})
            if number >= last:
                out["next"] = None
            if number <= 1:
                out["prev"] = None
        return out

    def past_end(self, total: int, q: Query) -> None:
        """`Hard.past_end_404`: a page past the last of `total` rows is a 404 (Django's
        paginator; page 1 is always served)."""
        if self.hard.past_end_404 and q.number > max(1, -(-total // q.size)):
            raise Reply(error(404, "Not Found", "Invalid page."))

    def rec(self, type_name: str, raw_id: str) -> Rec:
        """The row a path names, or a 404."""
        rid = int(raw_id) if raw_id.isdigit() else -1
        rec = self.data.by_type.get(type_name, {}).get(rid)
        if rec is None:
            raise Reply(error(404, "Not Found", f"no {type_name} with id {raw_id}"))
        return rec

    def parse(
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
            raise Reply(error(400, "Bad Request", str(exc), exc.parameter)) from None
        self._framework_includes(q.include)
        allowed = self.hard.includes_allowed
        if allowed is not None and q.include:
            for path in q.include:
                if path.split(".")[0] not in allowed:
                    raise Reply(
                        error(
                            400,
                            "Bad Request",
                            f"{path}: including {path.split('.')[0]} is not supported",
                            "include",
                        )
                    )
        if not sortable and self.hard.sort_undocumented_ignored:
            q = replace(q, sort=(("id", False),))
        hidden = self.links_only()
        if hidden and q.include:  # served with links only, and nothing included for them
            q = replace(q, include=without_linkage(type_name, q.include, hidden))
        if self.hard.deals_without_stores and q.include:
            q = replace(q, include=without_linkage(type_name, q.include, DEAL_STORE))
        members = [p for p in q.include if p.split(".")[0] in PER_MALL_ONLY]
        if type_name == "malls" and members and self._mall_includes:
            self.member_pages += 1
        elif type_name == "malls" and members:
            raise Reply(
                error(
                    400,
                    "Bad Request",
                    f"{members[0]}: {members[0].split('.')[0]} of malls cannot be included",
                    "include",
                )
            )
        return q

    def _framework_includes(self, include: tuple[str, ...]) -> None:
        """`Hard.include_path_500` and `Hard.nested_include_400`: a path repeating a name is a
        500, a nested path through images a 400 naming `include`."""
        for path in include:
            names = path.split(".")
            if self.hard.include_path_500 and len(set(names)) < len(names):
                raise Reply(error(500, "Server Error", "Internal Server Error"))
            if self.hard.nested_include_400 and len(names) > 1 and names[0] == "images":
                raise Reply(
                    error(
                        400, "Bad Request", f"{path}: this include path is not supported", "include"
                    )
                )

    def all_linkage(self) -> bool:
        """Whether included resources carry the linkage of every relationship (the framework's
        rendering, on with `Hard.include_path_500` or `Hard.nested_include_400`)."""
        return self.hard.include_path_500 or self.hard.nested_include_400

    def links_only(self) -> frozenset[tuple[str, str]]:
        """The relationships (owner, name) served without linkage whatever `include` asks: a
        mall's members (`no_include_linkage`, `route_memberships`)."""
        if self.hard.no_include_linkage:
            return frozenset(("malls", n) for n in MALL_MEMBERS)
        if self.hard.route_memberships:
            return frozenset({("malls", "contacts"), ("malls", "deals")})
        return frozenset()

    async def attributes(self, request: web.Request) -> dict[str, Any]:
        """The `data.attributes` of a JSON:API request body (account creation, login, webhook
        subscription). JSON:API requires its media type for request bodies: another content
        type is 415, unless the emulator runs with `strict_content_type` off."""
        if self.strict_content_type and request.content_type != JSONAPI_TYPE:
            raise Reply(
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
            raise Reply(
                error(400, "Bad Request", "body must be {data: {type, attributes: {...}}}")
            ) from None
