"""Linkage by the relationships' own routes, where the upstream refuses them in `include=`.

JSON:API lets a server refuse an include path (400), and the spec shows no valid include names.
When a path is refused (`UpstreamProfile`, learned at run time by the client), the listings go
on without it and their linkage is taken from the relationship's own route where the spec lists
one (`GET /articles/{id}/malls`, `/deals/{id}/stores`, `/job-listings/{id}/store`: see
`catalogue.RELATED_ROUTES`), one request (and its pages) per owner and relationship; the related
rows of sideloaded types (images, tags) come whole on those routes and are written too.
Relationships with no route of their own are reported as not mirrored, never guessed
(`ccsync status`, `upstream profile`).

Costly by nature (a request per owner), so it runs only for relationships whose own path is
refused and no include brings (a refused `images.tags` leaves `images` served, and its linkage
comes on the included images): over every mirrored owner after a backfill and once per cycle of
the rolling proof (at its priority); a reconcile asks only the owners the change feed gives a
new version since the last fill (`changed_only`), never every owner again (#47).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.channel.profile import RouteProfile, UpstreamProfile, route_key
from sync.core.errors import NotFoundError
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import Relationship, ResourceType
from sync.pipeline.encoding import parse_id
from sync.pipeline.staging import stage_resources
from sync.store import MirrorStore

_log = get_logger("sync.relroutes")
#: The change feed's number each type's owners were last filled through (`_sync_meta`).
FILLED_KEY = "relroutes_filled"

#: Refused relationships whose linkage the mall routes give (`sync.jobs.malls.mallroutes`).
BY_MALL_ROUTES: dict[str, tuple[str, ...]] = {"malls": ("contacts",)}


def routed(rtype: ResourceType, route: RouteProfile | None) -> tuple[list[Relationship], list[str]]:
    """(relationships to take from their own routes, refused ones with no route) of `rtype`.
    Only a relationship whose own path is refused: a refused nested path (`images.tags`) is
    that path alone, `images` still serves its linkage through `include=`."""
    if route is None:
        return [], []
    refused = {p for p, v in route.includes.items() if v == "refused" and "." not in p}
    have = catalogue.RELATED_ROUTES.get(rtype.name, frozenset())
    # A mall's contacts come from its own route all the same (`sync.jobs.malls.mallroutes`).
    rels = [
        r
        for r in rtype.relationships
        if r.name in refused and r.name not in BY_MALL_ROUTES.get(rtype.name, ())
    ]
    return [r for r in rels if r.name in have], sorted(r.name for r in rels if r.name not in have)


class Routed(Protocol):
    """What `RelatedRoutes` asks of the upstream client (`ChannelClient`, or a test's fake):
    the profile (which include paths were refused), the relationship routes and their walk."""

    paging: Paging

    @property
    def profile(self) -> UpstreamProfile | None: ...

    def learn_profile(self) -> object: ...

    async def related_one(self, path: str) -> Any: ...

    async def related_page(self, path: str, number: int) -> Page: ...


class RelatedRoutes:
    """Fills the linkage of refused include paths from the relationships' own routes."""

    def __init__(self, client: Routed, mirror: MirrorStore) -> None:
        self.client = client
        self.mirror = mirror

    async def fill(
        self, types: Sequence[ResourceType], *, changed_only: bool = False
    ) -> dict[str, int]:
        """For each of `types` with refused include paths: every mirrored owner's linkage of
        those with a route (`changed_only`: the owners with a new version since the last fill,
        every owner where none is recorded); returns owners filled per type. The profile
        records, per path, where its linkage comes from."""
        profile = self.client.profile
        out: dict[str, int] = {}
        for rtype in types:
            route = profile.route(route_key(rtype)) if profile is not None else None
            rels, unrouted = routed(rtype, route)
            if route is not None:
                for name in BY_MALL_ROUTES.get(rtype.name, ()):
                    if route.includes.get(name) == "refused":
                        route.linkage_from[name] = f"/malls/{{id}}/{name}"
                for r in rels:
                    route.linkage_from[r.name] = f"/{rtype.path}/{{id}}/{r.name.replace('_', '-')}"
                for name in unrouted:
                    route.linkage_from[name] = "not mirrored"
            if unrouted:
                _log.warning(
                    "relroutes.not_mirrored",
                    type=rtype.name,
                    relationships=unrouted,
                    hint="the upstream refuses these in include= and the spec lists no route "
                    "of their own: their links are not mirrored",
                )
            if not rels:
                continue
            seq = self.mirror.changes.last()
            owners = self._owners(rtype.name, seq) if changed_only else None
            if owners is None:
                owners = list(self.mirror.table(rtype.name).ids())
            for rid in owners:
                for rel in rels:
                    await self._one(rtype, rel, rid)
            self._filled(rtype.name, seq)
            out[rtype.name] = len(owners)
        if profile is not None:
            self.client.learn_profile()
        return out

    def _owners(self, name: str, upto: int) -> list[int] | None:
        """The owners of `name` with a new version since the last fill (None: no fill
        recorded, or the change feed pruned past it)."""
        since = self.mirror.meta.numbers(FILLED_KEY).get(name)
        if since is None or since < self.mirror.changes.pruned_through():
            return None
        return self.mirror.changes.new_versions(name, since, upto)

    def _filled(self, name: str, seq: int) -> None:
        self.mirror.meta.set_number(FILLED_KEY, name, seq)

    async def _one(self, rtype: ResourceType, rel: Relationship, rid: int) -> None:
        path = f"/{rtype.path}/{rid}/{rel.name.replace('_', '-')}"
        try:
            if rel.to_one:
                data = await self.client.related_one(path)
                one = parse_id(data["id"]) if isinstance(data, dict) else None
                self.mirror.table(rtype).set_to_one(rel.column, rid, one)
                return
            related: list[dict[str, Any]] = []

            def fetch(number: int) -> Awaitable[Page]:
                return self.client.related_page(path, number)

            async for page in self.client.paging.walk_numbers(fetch):
                related += page.resources
        except NotFoundError:
            return  # the owner is gone: the deletions feed or the reconcile removes it
        target = catalogue.TYPES[rel.target]
        if not target.listable and related:
            self.mirror.write_staged(stage_resources(target, related))
        self.mirror.table(rtype).replace_links(rel, rid, [parse_id(r["id"]) for r in related])
