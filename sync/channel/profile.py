"""The upstream profile: what the spec leaves open, as this upstream answered it, per route.

The spec says "not shown" for sortable attributes and valid include names, gives `page[size]` a
bound "subject to change" and a signing window of "several seconds". Nothing of that is assumed:
`probe` asks, cheaply (a few rows a request, ids and stamps only), per route:

- **sort**: is `sort=updated_at` honoured, and `-updated_at` (page 1 of each, a few rows: the
  first must ascend and the second descend, which id order never does both);
- **filter**: does `filter[updated_at][gte]` filter (every row returned at or after a stamp
  between the ones seen);
- **compares**: does `filter[updated_at][gte]=T&filter[updated_at][lte]=T` hold the rows served
  at T (`served`), or none of them (`finer`: the upstream keeps and compares stamps below the
  millisecond it serves, `sync.jobs.walks.Compares`); polls learn it too (`learned_compares`);
- **includes**: each include path the mirror would ask: refused (4xx, or a 5xx that path alone
  causes: the request without `include=` succeeds), served with linkage
  (`relationships.<name>.data`), or served without it; why a path was refused
  (`include_errors`), and for a refused nested path (`images.tags`) whether the rows its parent
  includes carry that linkage anyway (`linkage_from`);
- **etag**: is the ETag stable across two identical requests, and does `If-None-Match` answer 304;

and, for the whole upstream, the page size it serves (`Paging`), its clock offset and API version.
The profile is kept in the mirror (`_sync_meta`, `upstream_profile`), shown by `ccsync status`
and printed by `ccsync probe` (which writes no rows). Strategies read it (`sync.jobs.poll`: a route
whose sort is not honoured is walked without assuming order; the client drops refused include
paths; polls make conditional requests only where the ETag proved reliable), and a contradiction
seen at run time (rows out of order, a 400 on an include) updates it and is logged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import orjson

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.session import ChannelSession
from sync.core.errors import NotFoundError, RetriesExhaustedError, UpstreamError
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope
from sync.model.stamps import iso_ms, normalize_or_none

Verdict = Literal["honoured", "ignored", "refused", "unknown"]
IncludeVerdict = Literal["linkage", "no linkage", "refused", "unknown"]
EtagVerdict = Literal["304", "stable", "unstable", "none", "unknown"]

META_KEY = "upstream_profile"
#: Rows a probe request asks for: enough to see an order, small enough to cost nothing.
PROBE_ROWS = 10
#: 5xx answers a request with `include=` is allowed before the fallback asks which path causes
#: them (`sync.channel.includes`), instead of the whole retry budget.
INCLUDE_ATTEMPTS = 3
#: Timestamp skews tried to see how wide the signing window is ("several seconds").
SKEWS = (2.0, 5.0, 10.0, 30.0)

_log = get_logger("sync.profile")


@dataclass
class RouteProfile:
    """What one listing route answered."""

    route: str
    sort: Verdict = "unknown"
    sort_desc: Verdict = "unknown"
    filter: Verdict = "unknown"
    includes: dict[str, IncludeVerdict] = field(default_factory=dict)
    etag: EtagVerdict = "unknown"
    #: Set when a run saw the route contradict the probe (`contradicted`).
    note: str = ""
    #: Per refused include path: where its linkage comes from instead (the relationship's own
    #: route, `sync.jobs.relroutes`; for a nested path, `include=<parent>` whose included rows
    #: carry it), or "not mirrored".
    linkage_from: dict[str, str] = field(default_factory=dict)
    #: Per refused include path: what the upstream answered ("HTTP 400: ...", "HTTP 500 ...").
    include_errors: dict[str, str] = field(default_factory=dict)
    #: What the route's date filter compares (`sync.jobs.walks.Comparison`): "served" (at the
    #: served millisecond), "finer" (below it, stamps cut), "rounded", or "unknown".
    compares: str = "unknown"

    @property
    def sorted_walk(self) -> bool:
        """Whether a poll may walk this route by key in `updated_at` order ("unknown": too few
        rows to tell, so nothing contradicts it; each page is checked as it comes)."""
        return self.sort in ("honoured", "unknown")

    @property
    def conditional(self) -> bool:
        """Whether a poll may send `If-None-Match` here (the ETag proved stable and answered)."""
        return self.etag == "304"


@dataclass
class UpstreamProfile:
    """The profile of the whole upstream; see the module docstring."""

    probed_at: str = ""
    api_version: str | None = None
    page_size_asked: int = 0
    page_size_served: int | None = None
    clock_offset: float = 0.0
    #: The widest timestamp skew (seconds) a signed request was accepted with, of those tried
    #: (`SKEWS`); None when even the smallest was refused, 0 when not probed.
    signing_window: float | None = 0.0
    routes: dict[str, RouteProfile] = field(default_factory=dict)

    def route(self, key: str) -> RouteProfile | None:
        return self.routes.get(key)

    def refused_includes(self, rtype: ResourceType) -> set[str]:
        r = self.routes.get(route_key(rtype))
        return {p for p, v in (r.includes if r else {}).items() if v == "refused"}

    def to_json(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str | None) -> UpstreamProfile | None:
        """The stored profile, or None (never raises on a damaged value)."""
        if not text:
            return None
        try:
            raw = orjson.loads(text)
            routes = {k: RouteProfile(**v) for k, v in raw.pop("routes", {}).items()}
            return cls(**raw, routes=routes)
        except (orjson.JSONDecodeError, TypeError, AttributeError):
            return None

    def window(self) -> str:
        """The signing window as `ccsync probe` prints it."""
        if self.signing_window is None:
            return f"under {SKEWS[0]:g} s"
        if self.signing_window >= SKEWS[-1]:
            return f"at least {SKEWS[-1]:g} s"
        return f"{self.signing_window:g}-{SKEWS[SKEWS.index(self.signing_window) + 1]:g} s"

    def rows(self) -> list[tuple[str, str, str, str, str, str, str]]:
        """(route, sort, -sort, filter, compares, etag, includes) per route, for a table."""
        out: list[tuple[str, str, str, str, str, str, str]] = []
        for key in sorted(self.routes):
            r = self.routes[key]
            inc = ", ".join(f"{p}: {v}" for p, v in sorted(r.includes.items())) or "-"
            if key == DELETIONS_ROUTE:  # its own columns: sorted by created_at (`DELETIONS_NOTE`)
                out.append((key, r.sort, r.sort_desc, "not probed", r.compares, "not probed", inc))
                continue
            out.append((key, r.sort, r.sort_desc, r.filter, r.compares, r.etag, inc))
        return out


def route_key(rtype: ResourceType) -> str:
    """The route a type is listed at, as the profile names it (`/malls/{id}/stores`)."""
    return f"/malls/{{id}}/{rtype.path}" if rtype.level == "mall" else f"/{rtype.path}"


DELETIONS_ROUTE = "/deletions"
#: What the deletions feed's row of a profile means: it has no `updated_at`, so its sort and
#: `compares` are probed on `created_at`, and its filter and ETag not at all.
DELETIONS_NOTE = (
    "/deletions is the deletions feed: its sort, -sort and compares are on created_at "
    "(unknown: fewer than two entries to compare, e.g. an empty feed); its filter[created_at] "
    "and ETag are not probed (each poll asks from its cursor, unconditionally)"
)


class Probed(Protocol):
    """What the probes ask through: the `ChannelClient`'s listings and its session, as a
    protocol (the client holds the include fallback, which probes: this module cannot name
    the client's class without a cycle)."""

    session: ChannelSession

    async def list_page(
        self,
        request: Scope | Listing,
        number: int,
        *,
        refusals: bool = True,
        attempts: int | None = None,
        as_asked: bool = False,
    ) -> Page: ...

    async def list_deletions(
        self,
        number: int,
        *,
        since: str | None = None,
        size: int | None = None,
        sort: str | None = "created_at",
        until: str | None = None,
    ) -> Page: ...


class Profiler:
    """Runs the probes through a client (`Probed`)."""

    def __init__(self, client: Probed) -> None:
        self.client = client
        #: Include paths asked (`include`), why each refused one was, and the nested paths
        #: (`images.tags`) whose linkage the rows of their parent path came with.
        self.asked: set[str] = set()
        self.reasons: dict[str, str] = {}
        self.carried: set[str] = set()
        self._bare: dict[tuple[str, int | None], bool] = {}

    async def bare(self, rtype: ResourceType, mall: int | None) -> bool:
        """Whether `rtype`'s route answers without `include=` within `INCLUDE_ATTEMPTS` 5xx
        (asked once per route): False means a 5xx is not any include path's doing."""
        key = (rtype.name, mall)
        if key not in self._bare:
            try:
                await self._page(
                    rtype, mall, {}, include=False, refusals=False, attempts=INCLUDE_ATTEMPTS
                )
                self._bare[key] = True
            except RetriesExhaustedError as exc:
                if exc.status is None or exc.status < 500:
                    raise
                self._bare[key] = False
        return self._bare[key]

    async def probe(
        self, types: Sequence[ResourceType], malls: Sequence[int], *, deletions: bool = True
    ) -> UpstreamProfile:
        """Probe every route of `types` (mall-scoped ones in the first of `malls` that lists
        rows), and the deletions feed."""
        c, session = self.client, self.client.session
        profile = UpstreamProfile(probed_at=iso_ms(time.time()))
        # The page size served: one page as large as is asked, of the first top-level type
        # (a short page before `links.last` teaches the bound, `Paging.more`).
        # The first type with more than a page tells (a small one proves nothing).
        for rtype in [t for t in types if t.listable and t.level == "top"]:
            first = await c.list_page(
                Listing(Scope(rtype), fields=["updated_at"], include=False), 1
            )
            session.paging.more(first)
            if session.paging.served is not None or len(first.resources) >= session.paging.asked:
                break
        for rtype in types:
            if not rtype.listable:
                continue
            mall = await self._mall_with_rows(rtype, malls) if rtype.level == "mall" else None
            if rtype.level == "mall" and mall is None:
                continue
            profile.routes[route_key(rtype)] = await self._route(rtype, mall)
        if deletions:
            profile.routes[DELETIONS_ROUTE] = await self._deletions()
        profile.signing_window = await self._signing_window()
        profile.api_version = session.api_version
        profile.page_size_asked = session.paging.asked
        profile.page_size_served = session.paging.served
        profile.clock_offset = round(session.clock_offset, 3)
        return profile

    async def _signing_window(self) -> float | None:
        """Sign `GET /malls` (one row) with the timestamp off by each of `SKEWS`, ahead and
        behind, widest accepted first refused: the window the spec calls "several seconds"."""
        session = self.client.session
        widest: float | None = None
        for skew in SKEWS:
            ok = True
            for sign in (1, -1):

                def signed(s: float = skew * sign) -> dict[str, str]:
                    return {"page[size]": "1", "page[number]": "1", **session.credentials.params(s)}

                resp = await session.transport.send(
                    "GET",
                    f"{session.base}/malls",
                    params=signed,
                    headers={"Accept": "application/vnd.api+json"},
                    observe=session.observe,
                )
                ok = ok and resp.status < 400
            if not ok:
                break
            widest = skew
        return widest

    async def _mall_with_rows(self, rtype: ResourceType, malls: Sequence[int]) -> int | None:
        for mall in list(malls)[:5]:
            try:
                scope = Scope(rtype, mall)
                page = await self.client.list_page(
                    Listing(scope, fields=["updated_at"], include=False, size=1), 1
                )
            except NotFoundError:
                continue
            if page.resources:
                return mall
        return malls[0] if malls else None

    async def _page(
        self,
        rtype: ResourceType,
        mall: int | None,
        params: dict[str, str],
        *,
        fields: Sequence[str] | None = None,
        include: bool = True,
        **kw: Any,
    ) -> Any:
        scope = Scope(rtype, mall, rtype.scope_params[0])
        return await self.client.list_page(
            Listing(scope, params, fields, include, PROBE_ROWS), 1, **kw
        )

    async def _stamps(
        self, rtype: ResourceType, mall: int | None, field_: str, params: dict[str, str]
    ) -> list[str] | None:
        """The normalised `field_` stamps of page 1 with `params`; None when refused."""
        try:
            page = await self._page(rtype, mall, params, fields=[field_], include=False)
        except UpstreamError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (401, 429):
                return None
            raise
        return [
            s
            for r in page.resources
            if (s := normalize_or_none((r.get("attributes") or {}).get(field_)))
        ]

    async def order(self, rtype: ResourceType, mall: int | None, field_: str) -> Verdict:
        """Whether `sort=<field_>` (and `-<field_>`) is honoured on `rtype`'s route."""
        up, down, _ = await self._order(rtype, mall, field_)
        return "honoured" if up == down == "honoured" else up if up != "honoured" else down

    async def deletions_order(self) -> Verdict:
        r = await self._deletions()
        return "honoured" if r.sort == r.sort_desc == "honoured" else r.sort

    async def _order(
        self, rtype: ResourceType, mall: int | None, field_: str
    ) -> tuple[Verdict, Verdict, list[str]]:
        up = await self._stamps(rtype, mall, field_, {"sort": field_})
        down = await self._stamps(rtype, mall, field_, {"sort": f"-{field_}"})
        seen = sorted(set((up or []) + (down or [])))
        return _sorted(up, ascending=True), _sorted(down, ascending=False), seen

    async def _route(self, rtype: ResourceType, mall: int | None) -> RouteProfile:
        out = RouteProfile(route_key(rtype))
        if rtype.has_updated_at:
            out.sort, out.sort_desc, seen = await self._order(rtype, mall, "updated_at")
            out.filter = await self._filter(rtype, mall, "updated_at", seen)
            out.compares = await self._compares(rtype, mall, "updated_at", seen)
        for path in catalogue.include_paths(rtype.relationships):
            out.includes[path] = await self.include(rtype, mall, path)
        note_refusals(out, self)
        out.etag = await self._etag(rtype, mall)
        return out

    async def _filter(
        self, rtype: ResourceType, mall: int | None, field_: str, seen: list[str]
    ) -> Verdict:
        if len(seen) < 2:
            return "unknown"
        pivot = seen[len(seen) // 2]
        got = await self._stamps(rtype, mall, field_, {f"filter[{field_}][gte]": pivot})
        if got is None:
            return "refused"
        if not got:
            return "unknown"
        return "honoured" if all(s >= pivot for s in got) else "ignored"

    async def _compares(
        self, rtype: ResourceType, mall: int | None, field_: str, seen: list[str]
    ) -> str:
        """Whether `gte=T&lte=T` holds the rows served at T (the newest stamp seen)."""
        if not seen:
            return "unknown"
        at = seen[-1]
        got = await self._stamps(
            rtype, mall, field_, {f"filter[{field_}][gte]": at, f"filter[{field_}][lte]": at}
        )
        return _compared(at, got)

    async def include(self, rtype: ResourceType, mall: int | None, path: str) -> IncludeVerdict:
        """Whether `include=<path>` is refused (a 4xx; a 5xx within `INCLUDE_ATTEMPTS` while
        the route answers without it: `bare`), served with linkage, or without it."""
        name = path.split(".")[0]
        self.asked.add(path)

        async def ask(attempts: int | None) -> Any:
            return await self._page(
                rtype,
                mall,
                {"include": path},
                include=False,
                refusals=False,
                as_asked=True,
                attempts=attempts,
            )

        try:
            page = await ask(INCLUDE_ATTEMPTS)
        except UpstreamError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (401, 429):
                self.reasons[path] = f"HTTP {exc.status}: {exc.message}"[:200]
                return "refused"
            if not isinstance(exc, RetriesExhaustedError) or exc.status is None:
                raise
            if await self.bare(rtype, mall):
                self.reasons[path] = f"HTTP {exc.status} with this path only"
                return "refused"
            page = await ask(None)  # not the path's doing: the whole retry budget, as ever
        if not page.resources:
            return "unknown"
        if "." in path:
            return "linkage"  # served: a nested path's linkage is on the included rows
        self._carried(rtype, path, page.included)
        for r in page.resources:
            rel = (r.get("relationships") or {}).get(name)
            if isinstance(rel, dict) and "data" in rel:
                return "linkage"
        return "no linkage"

    def _carried(self, rtype: ResourceType, path: str, included: list[dict[str, Any]]) -> None:
        """Note the nested paths (`<path>.<rel>`) whose linkage the rows `path` included carry."""
        rel = next((r for r in rtype.relationships if r.name == path), None)
        if rel is None:
            return
        for row in included:
            if catalogue.normalize_type(str(row.get("type", ""))) != rel.target:
                continue
            for name, value in (row.get("relationships") or {}).items():
                if isinstance(value, dict) and "data" in value:
                    self.carried.add(f"{path}.{name}")

    async def _etag(self, rtype: ResourceType, mall: int | None) -> EtagVerdict:
        path = rtype.list_path(mall)
        query = {
            "page[size]": str(PROBE_ROWS),
            "page[number]": "1",
            "sort": "id",
            **rtype.scope_params[0],
        }
        first = await self.client.session.request("GET", path, query)
        again = await self.client.session.request("GET", path, query)
        tag = first.headers.get("ETag")
        if not tag:
            return "none"
        if again.headers.get("ETag") != tag:
            return "unstable"
        cond = await self.client.session.request("GET", path, query, headers={"If-None-Match": tag})
        return "304" if cond.status == 304 else "stable"

    async def _deletions(self) -> RouteProfile:
        out = RouteProfile(DELETIONS_ROUTE)
        pages: list[list[str] | None] = []
        for sort in ("created_at", "-created_at"):
            try:
                page = await self.client.list_deletions(1, size=PROBE_ROWS, sort=sort)
            except UpstreamError as exc:
                if exc.status is not None and 400 <= exc.status < 500:
                    pages.append(None)
                    continue
                raise
            pages.append(
                [
                    s
                    for r in page.resources
                    if (s := normalize_or_none((r.get("attributes") or {}).get("created_at")))
                ]
            )
        out.sort = _sorted(pages[0], ascending=True)
        out.sort_desc = _sorted(pages[1], ascending=False)
        if pages[0]:
            at = max(pages[0])
            try:
                page = await self.client.list_deletions(
                    1, since=at, until=at, size=PROBE_ROWS, sort="created_at"
                )
            except UpstreamError as exc:
                if exc.status is None or not 400 <= exc.status < 500:
                    raise
            else:
                out.compares = _compared(
                    at,
                    [
                        s
                        for r in page.resources
                        if (s := normalize_or_none((r.get("attributes") or {}).get("created_at")))
                    ],
                )
        return out


def note_refusals(route: RouteProfile, prober: Profiler) -> None:
    """Keep in `route` why each include path `prober` asked was refused, and where a refused
    nested path's linkage comes from: `include=<parent>` when the parent's included rows carry
    it (a refused `a.b` is that path only), else "not mirrored"."""
    for path in prober.asked:
        if route.includes.get(path) != "refused":
            route.include_errors.pop(path, None)
            continue
        route.include_errors[path] = prober.reasons.get(path, "")
        top = path.split(".")[0]
        if "." in path and top in prober.asked:
            served = route.includes.get(top) != "refused" and path in prober.carried
            route.linkage_from[path] = f"include={top}" if served else "not mirrored"


def _sorted(stamps: list[str] | None, *, ascending: bool) -> Verdict:
    if stamps is None:
        return "refused"
    if len(set(stamps)) < 2:
        return "unknown"
    ordered = sorted(stamps, reverse=not ascending)
    return "honoured" if stamps == ordered else "ignored"


def _compared(at: str, got: list[str] | None) -> str:
    """What `gte=at&lte=at` answering `got` (None: refused) says the filter compares."""
    if got is None:
        return "unknown"
    return "served" if at in got else "finer"


def learned_compares(profile: UpstreamProfile, key: str, level: str, evidence: str) -> None:
    """A walk saw route `key`'s date filter compare below the precision it serves (`evidence`):
    kept in the profile as `compares`, and logged."""
    route = profile.routes.setdefault(key, RouteProfile(key))
    route.compares = level
    route.note = f"{evidence} (seen {iso_ms(time.time())})"
    _log.warning(
        "upstream.filter_compares_finer",
        route=key,
        compares=level,
        seen=evidence,
        hint="the upstream compares stamps below the millisecond it serves; tie runs are read "
        "to the next millisecond from now on",
    )


def contradicted(profile: UpstreamProfile, key: str, what: str) -> bool:
    """A run saw route `key` answer against its profile (`what`: rows out of `updated_at` order):
    the route is marked so strategies fall back, and it is logged once. Whether it changed
    (the caller keeps the profile then, `ChannelClient.learn_profile`)."""
    route = profile.routes.setdefault(key, RouteProfile(key))
    if route.sort == "ignored" and route.note:
        return False
    route.sort = "ignored"
    route.note = f"{what} (seen {iso_ms(time.time())})"
    _log.warning(
        "upstream.profile_contradicted",
        route=key,
        seen=what,
        hint="the route answered against its probe; it is now walked without assuming order",
    )
    return True


#: How old a stored profile may be before the daemon probes again (at start, before a reconcile).
MAX_AGE_SECONDS = 86400.0


def stale(profile: UpstreamProfile | None, now: float, max_age: float = MAX_AGE_SECONDS) -> bool:
    """Whether `profile` is missing or older than `max_age`."""
    if profile is None or not profile.probed_at:
        return True
    return profile.probed_at < iso_ms(now - max_age)
