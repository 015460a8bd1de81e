"""Rows created again under a deleted id: what the old row's deletion changed elsewhere.

A deletions feed entry whose row the mirror holds newer than the entry (`FeedApplied.kept`), or
stamped the entry's very moment and still served by `filter[id]` (`Poller._settle_ties`), names
a row deleted and created again under its id; a poll wrote the new row before the feed was read.
The row is the new one and stays. But the deletion changed other rows without moving their
stamps, so no poll sees it:

- every owner whose linkage named the old row lost it (a join row upstream): the owners are
  fetched again by `filter[id]` (their links rewritten whole; the guard takes a copy of the same
  stamp), in every scope of a top-level type or in each mall that lists a mall-scoped owner; an
  owner with no route (images, tags, groups) loses its links to the row, as the deletion would
  have taken them;
- a mall-scoped old row's malls may not list the new one: each mall the mirror lists it in is
  asked by `filter[id]`, and one that no longer serves it loses the membership; a mall created
  again under a deleted mall's id has each member the old one had asked the same way.

The feed's overlap reads an entry again on every poll within its lookback; a row is settled
once per stamp it holds (`SETTLED_KEPT` remembered), so that costs no requests after the first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from sync.channel.client import MAX_IDS
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence
from sync.model import catalogue
from sync.model.catalogue import ResourceType

#: (type, id, stamp) of rows already settled, remembered in this process.
SETTLED_KEPT = 10_000


class Recreated:
    """Settles rows created again under a deleted id (see the module docstring)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.mirror = evidence.mirror
        self._settled: OrderedDict[tuple[str, int, str | None], None] = OrderedDict()
        self.log = get_logger("sync.poll")

    async def settle(self, rows: Mapping[str, Sequence[int]]) -> int:
        """Settle `rows` (type -> ids of rows created again); returns the upstream requests
        made. A failure raises before anything is remembered: the next poll asks again."""
        asked = 0
        for name, ids in rows.items():
            stamps = self.mirror.table(name).stamps(list(ids))
            todo = [i for i in dict.fromkeys(ids) if (name, i, stamps.get(i)) not in self._settled]
            if not todo:
                continue
            owners = self.mirror.table(name).linked_from(todo)
            refetched = unlinked = 0
            for owner, owner_ids in owners.items():
                rtype = catalogue.TYPES[owner]
                if rtype.listable:
                    asked += await self._refetch(rtype, owner_ids)
                    refetched += len(owner_ids)
                else:
                    unlinked += self.mirror.table(name).unlink_from(owner, todo)
            left = 0
            rtype = catalogue.TYPES[name]
            if rtype.level == "mall":
                asked += len({m for i in todo for m in self.mirror.table(name).malls_of(i)})
                left = await self.evidence.leave_malls(rtype, todo)
            elif name == "malls":
                for mall in todo:  # the old mall's members are not the new one's
                    for member in catalogue.TYPES.values():
                        if member.level != "mall":
                            continue
                        held = list(self.mirror.table(member.name).ids(mall_id=mall))
                        asked += -(-len(held) // MAX_IDS)
                        left += await self.evidence.leave_mall(member, mall, held)
            for rid in todo:
                self._remember((name, rid, stamps.get(rid)))
            self.log.info(
                "deletions.row_created_again",
                type=name,
                ids=todo[:20],
                count=len(todo),
                owners_refetched=refetched,
                links_removed=unlinked,
                memberships_left=left,
                hint="the old row's deletion changed its owners' linkage and its malls "
                "without moving their stamps: asked again by filter[id]",
            )
        return asked

    async def _refetch(self, rtype: ResourceType, ids: list[int]) -> int:
        """Fetch owners `ids` again in their scopes and write them; the requests made."""
        groups: Mapping[int | None, list[int]]
        if rtype.level == "top":
            groups = {None: ids}
        else:
            groups = {m: g for m, g in self.mirror.table(rtype.name).by_mall(ids).items()}
        asked, _ = await self.evidence.fetch_in_malls(rtype, groups)
        return asked

    def _remember(self, key: tuple[str, int, str | None]) -> None:
        self._settled[key] = None
        if len(self._settled) > SETTLED_KEPT:
            self._settled.popitem(last=False)
