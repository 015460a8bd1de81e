"""The mall routes asked for the rows that changed: a routed membership kept once per change.

Where `malls_contacts` or `malls_deals` is listed from the mall routes (`sync.jobs.malls.mallroutes`,
source `route`), no field of a contact or deal names its malls, so a new version of one may
have joined or left any mall. What changed is the change feed's word (`sync.store.changes`:
an `upsert` or `repair` entry is a version the mirror did not hold, whichever path wrote it:
a poll, a notice, the proof), never what a poll was served: its lookback serves the row at
the cursor again on every poll, and that is no change.

So after each poll of a routed type, the rows changed since the feed's number last followed
(`MallRoutes.followed`) are asked of every mall's route by `filter[id]` (one request a mall per
100 rows): the asked rows a route lists are that mall's, the others are not, and the mall's
other rows stay. A mall whose whole route costs no more requests than that (few rows), or whose
route does not honour `filter[id]` (it answers a row not asked), is walked whole instead. With
nothing changed, nothing is asked: a membership that moves under an unchanged row is the
rolling proof's (its cycle walks every route, `sync.jobs.proving.proof`). The number is kept only once
every mall answered, so a failure asks again; with no number kept (a mirror from before) or
the feed pruned past it, every route is walked once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sync.channel.client import MAX_IDS
from sync.core.errors import NotFoundError
from sync.core.logs import get_logger
from sync.jobs.evidence import confirm_mall_gone
from sync.jobs.fanout import bounded
from sync.jobs.malls.mallroutes import MallRoutes, Routes, route_scope
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore

_log = get_logger("sync.mallroutes")


class TouchedMalls:
    """Keeps the routed memberships of the rows that changed (see the module docstring)."""

    def __init__(self, client: Routes, mirror: MirrorStore) -> None:
        self.client = client
        self.mirror = mirror
        self.routes = MallRoutes(client, mirror)

    async def follow(self, name: str, malls: Sequence[int]) -> int:
        """Ask the mall routes of `name` (contacts or deals) for its rows changed since last
        followed, where the routes are its memberships' source; the rows asked."""
        if self.routes.decisions().get(name) != "route" or not malls:
            return 0
        feed = self.mirror.changes
        since = self.routes.followed().get(name)
        if since is None or since < feed.pruned_through():
            _log.info("mall_routes.walk_all", type=name, why="no change feed number to follow")
            await self.routes.from_routes(name, malls)
            return 0
        upto = feed.last()
        ids = feed.new_versions(name, since, upto)
        if ids:
            await self._ask(name, ids, malls)
        self.routes.mark_followed(name, upto)
        return len(ids)

    async def _ask(self, name: str, ids: list[int], malls: Sequence[int]) -> None:
        """Every mall's membership of `ids`, `concurrency` malls at a time."""
        batches = [ids[i : i + MAX_IDS] for i in range(0, len(ids), MAX_IDS)]
        size = self.client.paging.size
        table = self.mirror.table(name)
        changed = 0

        async def one(mall: int) -> None:
            nonlocal changed
            held = table.count_in_mall_links(mall)
            if max(1, math.ceil(held / size)) <= len(batches):
                await self.routes.walk_mall(name, mall)  # its whole route costs no more
                return
            scope = route_scope(name, mall)
            for batch in batches:
                try:
                    page = await self.client.fetch_ids(scope, batch)
                except NotFoundError as exc:
                    await confirm_mall_gone(self.client, mall, exc)
                    return  # the mall is gone: the reconcile drops it
                listed = {parse_id(r["id"]) for r in page.resources}
                if not listed <= set(batch):
                    _log.info("mall_routes.filter_id_ignored", type=name, mall_id=mall)
                    await self.routes.walk_mall(name, mall)
                    return
                changed += table.settle_mall_links(mall, batch, sorted(listed))

        await bounded(malls, self.client.settings.concurrency, one)
        if changed:
            _log.info("mall_routes.followed", type=name, rows=len(ids), memberships=changed)
