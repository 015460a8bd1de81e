"""The `include=` fallback: include paths the upstream refuses are found out one by one and left out.

The spec does not list the valid include names ("not shown"). A listing asks for every include
path the mirror would use; an upstream that refuses one answers the whole request with a 400.
Rather than lose the listing, the client asks each path alone (one row, `Profiler.include`),
marks the refused ones in the upstream profile (`sync.channel.profile`, kept in the mirror), and
sends the listing again without them; every later listing of that route leaves them out
(`include_for`). Their linkage then comes from the relationship's own route
(`sync.jobs.relroutes`) or is not mirrored, which `ccsync status` says.
"""

from __future__ import annotations

from collections.abc import Mapping

from sync.channel.profile import UpstreamProfile, route_key
from sync.channel.session import ChannelSession
from sync.core.errors import UpstreamError
from sync.model.catalogue import ResourceType


class IncludeFallback(ChannelSession):
    """The include paths a listing may ask on a route, and what a 400 refusing them does."""

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
