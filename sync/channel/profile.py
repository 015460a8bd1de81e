"""The upstream profile: what the spec leaves open, as this upstream answered it, per route.

The spec says "not shown" for sortable attributes and valid include names, gives `page[size]` a
bound "subject to change" and a signing window of "several seconds". Nothing of that is assumed:
the profiler (`sync.channel.profiler`) asks, cheaply (a few rows a request, ids and stamps
only), per route:

- **sort**: is `sort=updated_at` honoured, and `-updated_at` (page 1 of each, a few rows: the
  first must ascend and the second descend, which id order never does both);
- **filter**: does `filter[updated_at][gte]` filter (every row returned at or after a stamp
  between the ones seen);
- **compares**: does `filter[updated_at][gte]=T&filter[updated_at][lte]=T` hold the rows served
  at T (`served`), or none of them (`finer`: the upstream keeps and compares stamps below the
  millisecond it serves, `sync.jobs.incremental.walks.Compares`); polls learn it too (`learned_compares`);
- **includes**: each include path the mirror would ask: refused (4xx, or a 5xx that path alone
  causes: the request without `include=` succeeds), served with linkage
  (`relationships.<name>.data`), or served without it; why a path was refused
  (`include_errors`), and for a refused nested path (`images.tags`) whether the rows its parent
  includes carry that linkage anyway (`linkage_from`);
- **etag**: is the ETag stable across two identical requests, and does `If-None-Match` answer 304;

and, for the whole upstream, the page size it serves (`Paging`), its clock offset and API version.
The profile is kept in the mirror (`_sync_meta`, `upstream_profile`), shown by `ccsync status`
and printed by `ccsync probe` (which writes no rows). Strategies read it (`sync.jobs.incremental.poll`: a route
whose sort is not honoured is walked without assuming order; the client drops refused include
paths; polls make conditional requests only where the ETag proved reliable), and a contradiction
seen at run time (rows out of order, a 400 on an include) updates it and is logged.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import orjson

from sync.core.logs import get_logger
from sync.model.catalogue import ResourceType
from sync.model.stamps import iso_ms

Verdict = Literal["honoured", "ignored", "refused", "unknown"]
IncludeVerdict = Literal["linkage", "no linkage", "refused", "unknown"]
EtagVerdict = Literal["304", "stable", "unstable", "none", "unknown"]

META_KEY = "upstream_profile"
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
    #: route, `sync.jobs.malls.relroutes`; for a nested path, `include=<parent>` whose included rows
    #: carry it), or "not mirrored".
    linkage_from: dict[str, str] = field(default_factory=dict)
    #: Per refused include path: what the upstream answered ("HTTP 400: ...", "HTTP 500 ...").
    include_errors: dict[str, str] = field(default_factory=dict)
    #: What the route's date filter compares (`sync.jobs.incremental.walks.Comparison`): "served" (at the
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
