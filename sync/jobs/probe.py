"""The operator's probe of an upstream: what it answers where the spec is silent, no row written.

`ccsync probe` asks before sync is pointed at a new upstream, so no mirror is opened: the
mall-scoped routes are probed in the first malls the upstream lists. The daemon keeps its own
profile in the mirror (`sync.channel.profile`, probed in the malls it holds). The words of a
profile, for `ccsync probe` and `ccsync status`, are here too (`unusable`, `route_words`).
"""

from __future__ import annotations

from typing import Any

from sync.channel.client import ChannelClient
from sync.channel.listing import Listing
from sync.channel.profile import DELETIONS_ROUTE, UpstreamProfile
from sync.channel.profiler import Profiler
from sync.core.config import Settings
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.encoding import parse_id

#: Malls asked for the mall-scoped routes: a few, so a mall without rows of a type is not alone.
PROBED_MALLS = 5


async def probe(settings: Settings) -> UpstreamProfile:
    """Probe every route of the configured types (mall-scoped ones in the first malls listed)
    and the deletions feed; opens no mirror."""
    async with ChannelClient(settings.upstream) as client:
        types = settings.upstream.mirrored_types()
        malls: list[int] = []
        if any(t.level == "mall" for t in types):
            malls_scope = Scope(catalogue.TYPES["malls"])
            page = await client.list_page(
                Listing(malls_scope, fields=["updated_at"], include=False, size=PROBED_MALLS), 1
            )
            malls = [parse_id(r["id"]) for r in page.resources]
        return await Profiler(client).probe(types, malls)


def api_version(profile: UpstreamProfile) -> str:
    """The API version as `ccsync probe` prints it, or what was not served."""
    return profile.api_version or "not served (no X-API-Version header)"


def unusable(profile: UpstreamProfile) -> list[str]:
    """What the probe found it cannot use, and why, one line each (`ccsync probe`)."""
    out: list[str] = []
    if not profile.api_version:
        out.append("X-API-Version: not served; a change of major version cannot be told")
    for key in sorted(profile.routes):
        r = profile.routes[key]
        for path, verdict in sorted(r.includes.items()):
            if verdict == "refused":
                why = r.include_errors.get(path) or "refused"
                source = r.linkage_from.get(path)
                then = f"; its linkage from {source}" if source else ""
                out.append(f"{key} include={path}: {why}; left out of listings{then}")
        if r.etag == "none":
            out.append(f"{key}: no ETag; polls ask without If-None-Match")
        elif r.etag == "unstable":
            out.append(f"{key}: ETag changes between identical requests; polls unconditional")
        if r.sort in ("ignored", "refused"):
            out.append(f"{key}: sort=updated_at {r.sort}; polled unsorted")
        elif r.sort_desc in ("ignored", "refused"):
            # The polls walk ascending (`RouteProfile.sorted_walk` reads `sort` alone).
            out.append(f"{key}: sort=-updated_at {r.sort_desc}; polls need only the ascending")
        if r.filter in ("ignored", "refused"):
            out.append(f"{key}: filter[updated_at][gte] {r.filter}; polls read whole listings")
    return out


def route_words(key: str, r: dict[str, Any]) -> str:
    """One route of a stored profile (`RouteProfile` as JSON) as `ccsync status` words it: how
    it is polled, its ETag, the include paths refused or serving no linkage and where their
    linkage comes from; the deletions feed, which has no `updated_at`, in its own terms."""
    if key == DELETIONS_ROUTE:
        sort = r.get("sort", "unknown")
        why = "; unknown: fewer than two entries to compare" if sort == "unknown" else ""
        return (
            f"the deletions feed, read from its cursor (sort by created_at {sort}{why}); "
            "filter and etag not probed"
        )
    refused = sorted(p for p, v in (r.get("includes") or {}).items() if v == "refused")
    bare = sorted(p for p, v in (r.get("includes") or {}).items() if v == "no linkage")
    sorted_walk = r.get("sort") in ("honoured", "unknown")
    how = "walked by updated_at" if sorted_walk else "polled unsorted (sort not honoured)"
    line = f"{how}; etag {r.get('etag', 'unknown')}"
    if refused:
        sources = r.get("linkage_from") or {}
        errors = r.get("include_errors") or {}
        line += "; include refused: " + ", ".join(
            f"{p} ({errors[p] + '; ' if errors.get(p) else ''}linkage {_source(sources.get(p))})"
            for p in refused
        )
    if bare:
        line += f"; include serves no linkage: {', '.join(bare)}"
    if r.get("compares") in ("finer", "rounded"):
        line += (
            f"; date filters compare below the served millisecond ({r['compares']}): "
            "tie runs read to the next millisecond"
        )
    return line


def _source(route: str | None) -> str:
    """Where a refused include path's linkage comes from."""
    return "not mirrored" if route in (None, "not mirrored") else f"from {route}"
