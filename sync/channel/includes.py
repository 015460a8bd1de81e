"""The `include=` fallback: include paths the upstream refuses are found out one by one and left out.

The spec does not list the valid include names ("not shown"). A listing asks for every include
path the mirror would use; an upstream that refuses one answers the whole request with a 400.
Rather than lose the listing, the client asks each path alone (one row, `Profiler.include`),
marks the refused ones in the upstream profile (`sync.channel.profile`, kept in the mirror), and
sends the listing again without them; every later listing of that route leaves them out
(`includes.paths`). Their linkage then comes from the relationship's own route
(`sync.jobs.malls.relroutes`), from the included rows of the path's parent, or is not mirrored, which
`ccsync status` says. A refused `a.b` is that path only: `a` is asked on its own.

Some upstreams fail on one path with a 5xx instead (a framework whose prefetch breaks on
`tags.tags`): retrying that for the whole retry budget only delays the listing's failure. So a
listing with `include=` is asked with a small 5xx allowance (`INCLUDE_ATTEMPTS`); when it runs
out, the same request without `include=` is asked (same allowance): if that fails too, the 5xx
is not the include's, and the listing is asked again with the whole retry budget; if it
succeeds, each path is asked alone, and one that answers 5xx while the bare request succeeds is
marked refused (its reason kept, `RouteProfile.include_errors`) like a 400. The next probe asks
it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from sync.channel.profile import RouteProfile, UpstreamProfile, route_key
from sync.channel.profiler import INCLUDE_ATTEMPTS, Probed, Profiler, note_refusals
from sync.core.errors import RetriesExhaustedError, UpstreamError
from sync.core.logs import get_logger
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope


class Profiled(Probed, Protocol):
    """The client the fallback serves: it probes through it and changes its profile."""

    @property
    def profile(self) -> UpstreamProfile | None: ...

    def learn_profile(
        self, profile: UpstreamProfile | None = None, *, save: bool = True
    ) -> UpstreamProfile: ...


class IncludeFallback:
    """The include paths a listing may ask on a route, and what a 400 refusing them does;
    held by the client (`ChannelClient.includes`)."""

    def __init__(self, client: Profiled) -> None:
        self.client = client
        self.log = get_logger("sync.channel")
        #: One fallback at a time per route: the scopes that met the same refusal side by side
        #: wait for the first one's verdict.
        self.locks: dict[str, asyncio.Lock] = {}

    def paths(self, rtype: ResourceType, paths: str | None = None) -> str:
        """`paths` (default: `rtype`'s include paths) less those the upstream refused on
        `rtype`'s route (`UpstreamProfile`)."""
        paths = rtype.include if paths is None else paths
        profile = self.client.profile
        if profile is None:
            return paths
        refused = profile.refused_includes(rtype)
        if not refused:
            return paths
        return ",".join(
            p for p in paths.split(",") if p and p not in refused and p.split(".")[0] not in refused
        )

    @staticmethod
    def attempts(query: Mapping[str, str], refusals: bool = True) -> int | None:
        """The 5xx allowance of a listing request: `INCLUDE_ATTEMPTS` when it carries
        `include=` and the fallback may run, else None (the whole retry budget)."""
        return INCLUDE_ATTEMPTS if refusals and "include" in query else None

    @staticmethod
    def failing(exc: UpstreamError, query: Mapping[str, str]) -> bool:
        """Whether `exc` is a listing with `include=` that ran out of its small 5xx allowance."""
        return (
            "include" in query
            and isinstance(exc, RetriesExhaustedError)
            and exc.status is not None
            and exc.status >= 500
        )

    async def refused(self, exc: UpstreamError, scope: Scope, query: Mapping[str, str]) -> bool:
        """Whether `exc` was a 400 refusing the request's include paths, or a 5xx one of them
        causes, now marked refused (`find_refused`), so the request can go again without
        them."""
        if self.failing(exc, query):
            return await self.find_refused(scope, query["include"], failing=True)
        if exc.status != 400 or "include" not in query or "includ" not in str(exc).lower():
            return False
        return await self.find_refused(scope, query["include"])

    async def find_refused(self, scope: Scope, paths: str, *, failing: bool = False) -> bool:
        """A listing of `scope` with `include=<paths>` was refused with a 400 (`failing`:
        answered 5xx past its small allowance): ask each path alone (one row) and mark the
        refused ones in the profile, so the request can go again without them. False when no
        path was refused (the answer was about something else; with `failing`, also when the
        request without `include=` fails as well: the 5xx is not the include's)."""
        rtype = scope.rtype
        async with self.locks.setdefault(route_key(rtype), asyncio.Lock()):
            profile = self.client.profile
            if profile is not None and profile.refused_includes(rtype) & set(paths.split(",")):
                return True  # found out by a listing beside this one meanwhile
            return await self._ask_each(rtype, scope.mall_id, paths, failing)

    async def _ask_each(
        self, rtype: ResourceType, mall: int | None, paths: str, failing: bool
    ) -> bool:
        profile = self.client.learn_profile(save=False)
        key = route_key(rtype)
        route = profile.routes.setdefault(key, RouteProfile(key))
        prober = Profiler(self.client)
        if failing and not await prober.bare(rtype, mall):
            return False
        found = False
        for path in [p for p in paths.split(",") if p]:
            try:
                verdict = await prober.include(rtype, mall, path)
            except UpstreamError:
                if failing:
                    return False  # the path alone failed as the bare request did not: unclear
                raise
            route.includes[path] = verdict
            found = found or verdict == "refused"
        note_refusals(route, prober)
        if found:
            self.log.warning(
                "upstream.include_refused",
                route=key,
                refused={
                    p: route.include_errors.get(p, "")
                    for p in sorted(route.includes)
                    if route.includes[p] == "refused"
                },
                hint="the upstream refuses these include paths (4xx, or a 5xx only they cause); "
                "the listing goes on without them and their linkage is not mirrored through "
                "include=",
            )
            self.client.learn_profile()
        return found
