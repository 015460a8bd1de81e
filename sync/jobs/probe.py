"""The operator's probe of an upstream: what it answers where the spec is silent, no row written.

`ccsync probe` asks before sync is pointed at a new upstream, so no mirror is opened: the
mall-scoped routes are probed in the first malls the upstream lists. The daemon keeps its own
profile in the mirror (`sync.channel.profile`, probed in the malls it holds).
"""

from __future__ import annotations

from sync.channel.client import ChannelClient
from sync.channel.listing import Listing
from sync.channel.profile import UpstreamProfile
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
