"""The profiler: the probes that fill the upstream profile (`sync.channel.profile`, which says
what is asked and why), through the client's listings as a protocol (`Probed`: the client
holds the include fallback, which probes, so this module cannot name the client's class).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.profile import (
    DELETIONS_ROUTE,
    SKEWS,
    EtagVerdict,
    IncludeVerdict,
    RouteProfile,
    UpstreamProfile,
    Verdict,
    route_key,
)
from sync.channel.session import ChannelSession
from sync.core.errors import NotFoundError, RetriesExhaustedError, UpstreamError
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope
from sync.model.stamps import iso_ms, normalize_or_none

#: Rows a probe request asks for: enough to see an order, small enough to cost nothing.
PROBE_ROWS = 10
#: 5xx answers a request with `include=` is allowed before the fallback asks which path causes
#: them (`sync.channel.includes`), instead of the whole retry budget.
INCLUDE_ATTEMPTS = 3


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
