"""Reconcile: compare a full id listing with the mirror; fetch what is missing or stale, drop what is gone.

Used twice: as the backfill's missed-row pass (page-number paging over a changing data set skips
a row whenever an earlier one is deleted mid-way) and as the daemon's scheduled reconcile, which
makes the mirror converge even when every webhook and poll was lost.

The listing asks for ids and `updated_at` only (sparse fieldsets) and lands in a temporary table,
so memory does not grow with the data. A local row missing from the listing is deleted only when
`filter[id]` confirms it is gone: the listing is paged by number too and can itself skip rows.
A guard refuses to delete more than a configured share of a table in one pass, so an upstream
glitch (an empty listing where there were rows) cannot empty the mirror.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from sync import sideloads
from sync.catalogue import ResourceType
from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.fetch import Fetcher, Scope, parse_id, scopes_of
from sync.logs import get_logger
from sync.store import Mirror

__all__ = [
    "MassDeleteRefused",
    "ReconcileResult",
    "Reconciler",
    "Scope",
    "group_by_mall",
    "parse_id",
    "scopes_of",
]


def group_by_mall(scopes: Sequence[Scope]) -> list[list[Scope]]:
    """Scopes that list one population of rows (deal visibilities of one mall) go together."""
    groups: dict[int | None, list[Scope]] = {}
    for s in scopes:
        groups.setdefault(s.mall_id, []).append(s)
    return list(groups.values())


@dataclass
class ReconcileResult:
    """What one reconcile of one (type, mall) did."""

    listed: int = 0
    local: int = 0
    fetched: int = 0
    removed: int = 0
    refused: int = 0
    notes: list[str] = field(default_factory=list)


class MassDeleteRefused(Exception):
    """More rows would be deleted than the guard allows; nothing was deleted."""


class Reconciler:
    """Brings one (type, mall) of the mirror in line with a full listing of the upstream."""

    def __init__(
        self,
        client: ChannelClient,
        mirror: Mirror,
        *,
        max_delete_share: float | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.fetcher = Fetcher(client, mirror)
        self.max_delete_share = max_delete_share
        self.log = get_logger("sync.reconcile")

    async def reconcile(self, scopes: Sequence[Scope]) -> ReconcileResult:
        """Reconcile the rows of `scopes` (one type, one mall): see the module docstring."""
        rtype, mall_id = scopes[0].rtype, scopes[0].mall_id
        result = ReconcileResult()
        with self.mirror.listing(rtype.name, mall_id) as listing:
            for scope in scopes:
                async for page in self._sparse_pages(scope):
                    sideloads.apply_page(self.mirror, rtype, page.resources, page.included)
                    listing.add(
                        (parse_id(r["id"]), (r.get("attributes") or {}).get("updated_at"))
                        for r in page.resources
                    )
            result.listed, result.local = listing.counts()
            claimed = listing.claim_mall()
            if claimed:
                self.log.info(
                    "reconcile.mall_claimed", type=rtype.name, mall_id=mall_id, rows=claimed
                )
            for ids in listing.missing_or_stale():
                result.fetched += await self.fetcher.fetch_and_write(scopes, ids)
            absent = [i for batch in listing.absent() for i in batch]
        if absent and result.listed == 0 and self.max_delete_share is not None:
            # An empty listing where the mirror holds rows: the glitch the guard exists for.
            self._refuse(rtype, mall_id, result, len(absent), "the upstream listed none")
        gone: list[int] = []
        for start in range(0, len(absent), 100):
            gone += await self.fetcher.confirm_gone(scopes, absent[start : start + 100])
        if gone:
            # Only deletions nothing explains reach the guard: rows the deletions feed listed
            # were deleted before the listing (`Reconcile.run` reads the feed first), and rows
            # `filter[id]` still finds were rewritten above, not counted.
            limit = self._delete_limit(result.local)
            if limit is not None and len(gone) > limit:
                self._refuse(rtype, mall_id, result, len(gone), "confirmed gone by filter[id]")
            result.removed += self.mirror.delete(rtype.name, gone)
        if result.fetched or result.removed:
            self.log.info(
                "reconcile.repaired",
                type=rtype.name,
                mall_id=mall_id,
                listed=result.listed,
                fetched=result.fetched,
                removed=result.removed,
            )
        return result

    def _refuse(
        self, rtype: ResourceType, mall_id: int | None, result: ReconcileResult, n: int, why: str
    ) -> None:
        result.refused = n
        self.log.error(
            "reconcile.mass_delete_refused",
            type=rtype.name,
            mall_id=mall_id,
            would_delete=n,
            local_rows=result.local,
            listed=result.listed,
            why=why,
            max_share=self.max_delete_share,
            hint="the upstream listing lacks many rows; check it, then raise "
            "schedule.reconcile_max_delete_share or run `ccsync reconcile --force`",
        )
        where = rtype.name if mall_id is None else f"{rtype.name} of mall {mall_id}"
        raise MassDeleteRefused(
            f"{where}: refusing to delete {n} of {result.local} rows ({why}; more than "
            f"{self.max_delete_share:.0%} that the deletions feed does not explain); "
            "nothing was deleted"
        )

    def _delete_limit(self, local: int) -> int | None:
        if self.max_delete_share is None:
            return None
        # Small tables would otherwise refuse every single deletion.
        return max(int(local * self.max_delete_share), 10)

    async def _sparse_pages(self, scope: Scope) -> AsyncIterator[Page]:
        # Ids and stamps, plus the sideloads whole with each owner's linkage (`sync.sideloads`).
        fields, extra = sideloads.params(scope.rtype)
        async for page in self.client.iter_pages(
            scope.rtype,
            mall_id=scope.mall_id,
            scope_params=scope.params,
            params=extra,
            fields=fields,
            include=False,
        ):
            yield page
