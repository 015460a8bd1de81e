"""Reconcile: compare a full id listing with the mirror; fetch what is missing or stale, drop what is gone.

Used twice: as the backfill's missed-row pass (page-number paging over a changing data set skips
a row whenever an earlier one is deleted mid-way) and as the scheduled reconcile of the daemon
and of `ccsync reconcile` (`reconcile_every_type`, the one walk both use; `run_reconcile` is the
command's library entry), which makes the mirror converge even when every webhook and poll was
lost.

The listing asks for ids and `updated_at` only (sparse fieldsets) and lands in a temporary table,
so memory does not grow with the data. Deletion is on evidence only:

- A top-level row missing from the listing is deleted only when `filter[id]` (every page of its
  answer) confirms it is gone: the listing is paged by number too and can itself skip rows.
- A mall-scoped row missing from one mall's listing (and from `filter[id]` in that mall) has
  left that mall: its membership goes (`sync.store.memberships`), the row stays. Once no mall
  lists it, `filter[id]` is asked in every mall the upstream lists; only a row no mall serves is
  deleted (`reconcile_orphans`).
- A mall route answering 404 means the mall is gone: its memberships, hours and current hours
  go, and the other malls and types carry on.

These are inferences, not the deletions feed's dated evidence: they leave no tombstone
(`sync.store.deletions`). A row the upstream lists again, whatever its stamp (a "current"
list that dropped an item and took it back), is absent locally and so fetched and written.

A guard refuses to delete more than a configured share of a table in one pass, so an upstream
glitch (an empty listing where there were rows) cannot empty the mirror.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.core.config import Settings
from sync.core.errors import NotFoundError
from sync.core.logs import get_logger
from sync.jobs.evidence import Asked, Evidence, Settling, confirm_mall_gone
from sync.jobs.incremental.poll import apply_feed_first
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.jobs.malls import sideloads
from sync.jobs.malls.mallroutes import MallRoutes, Routes
from sync.jobs.malls.relroutes import RelatedRoutes, Routed
from sync.jobs.oneshot import connected
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore

__all__ = [
    "EveryTypeResult",
    "MassDeleteRefused",
    "ReconcileResult",
    "Reconciler",
    "Scope",
    "group_by_mall",
    "parse_id",
    "reconcile_every_type",
    "run_reconcile",
    "scopes_of",
    "upstream_malls",
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
    #: Memberships added and removed (mall-scoped types): rows that joined or left the mall.
    joined: int = 0
    left: int = 0
    #: The mall route answered 404: the mall is gone (its memberships were dropped).
    mall_gone: bool = False
    notes: list[str] = field(default_factory=list)


class MassDeleteRefused(Exception):
    """More rows would be deleted than the guard allows; nothing was deleted."""


class Reconciled(Asked, Protocol):
    """What `Reconciler` asks of the upstream client (`ChannelClient`, or a test's fake): whole
    listings, and rows by `filter[id]` and a mall's fate (`Evidence`)."""

    def iter_pages(self, request: Scope | Listing, start: int = 1) -> AsyncIterator[Page]: ...


class Upstream(Reconciled, Routes, Routed, Protocol):
    """What `reconcile_every_type` asks besides: the relationship routes (`RelatedRoutes`) and
    the mall routes (`MallRoutes`)."""


ClientT = TypeVar("ClientT", bound=Reconciled)
UpstreamT = TypeVar("UpstreamT", bound=Upstream)


class Reconciler(Generic[ClientT]):
    """Brings one (type, mall) of the mirror in line with a full listing of the upstream;
    generic in its client, so `reconcile_every_type` asks more of it than a reconcile does."""

    def __init__(
        self,
        client: ClientT,
        mirror: MirrorStore,
        *,
        max_delete_share: float | None = None,
        settling: Settling | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.evidence = Evidence(client, mirror)
        self.max_delete_share = max_delete_share
        # None: an equal stamp is taken as the same version (the backfill's missed-row pass,
        # which the polls' lookback follows at once).
        self.settling = settling
        self.log = get_logger("sync.reconcile")

    async def reconcile(self, scopes: Sequence[Scope]) -> ReconcileResult:
        """Reconcile the rows of `scopes` (one type, one mall): see the module docstring."""
        rtype, mall_id = scopes[0].rtype, scopes[0].mall_id
        result = ReconcileResult()
        try:
            absent = await self._listed(scopes, result)
        except NotFoundError as exc:
            if mall_id is None:
                raise
            await confirm_mall_gone(self.client, mall_id, exc)
            self.mall_gone(mall_id)
            result.mall_gone = True
            return result
        if mall_id is not None:
            # Absent from this mall's listing: left the mall, unless `filter[id]` in the mall
            # still serves it (the listing skipped it). Never a deletion here.
            for start in range(0, len(absent), 100):
                chunk = absent[start : start + 100]
                try:
                    left = await self.evidence.confirm_gone(scopes, chunk)
                except NotFoundError as exc:
                    await confirm_mall_gone(self.client, mall_id, exc)
                    self.mall_gone(mall_id)
                    result.mall_gone = True
                    return result
                result.left += self.mirror.table(rtype.name).remove_memberships(mall_id, left)
            if result.left:
                self.log.info(
                    "reconcile.left_mall", type=rtype.name, mall_id=mall_id, rows=result.left
                )
            return result
        if absent and result.listed == 0 and self.max_delete_share is not None:
            # An empty listing where the mirror holds rows: the glitch the guard exists for.
            self._refuse(rtype, mall_id, result, len(absent), "the upstream listed none")
        gone: list[int] = []
        for start in range(0, len(absent), 100):
            gone += await self.evidence.confirm_gone(scopes, absent[start : start + 100])
        if gone:
            # Only deletions nothing explains reach the guard: rows the deletions feed listed
            # were deleted before the listing (`Reconcile.run` reads the feed first), and rows
            # `filter[id]` still finds were rewritten above, not counted.
            limit = self._delete_limit(result.local)
            if limit is not None and len(gone) > limit:
                self._refuse(rtype, mall_id, result, len(gone), "confirmed gone by filter[id]")
            result.removed += self.mirror.table(rtype.name).delete(gone)  # no tombstone: inferred
        self._log_repaired(rtype, mall_id, result)
        return result

    async def _listed(self, scopes: Sequence[Scope], result: ReconcileResult) -> list[int]:
        """List `scopes`, fetch what is missing or stale, record memberships; the local ids in
        scope that the listing lacks."""
        rtype, mall_id = scopes[0].rtype, scopes[0].mall_id
        with self.mirror.table(rtype.name).listing(mall_id) as listing:
            for scope in scopes:
                async for page in self._sparse_pages(scope):
                    sideloads.apply_page(self.mirror, rtype, page.resources, page.included)
                    listing.add(
                        (parse_id(r["id"]), (r.get("attributes") or {}).get("updated_at"))
                        for r in page.resources
                    )
            result.listed, result.local = listing.counts()
            result.joined = listing.claim_mall()
            if result.joined:
                self.log.info(
                    "reconcile.joined_mall", type=rtype.name, mall_id=mall_id, rows=result.joined
                )
            since = self.settling.since() if self.settling is not None else None
            for ids in listing.missing_or_stale(since):
                result.fetched += (await self.evidence.refetch(scopes, ids)).repaired
            absent = [i for batch in listing.absent() for i in batch]
        self._log_repaired(rtype, mall_id, result)
        return absent

    def _log_repaired(self, rtype: ResourceType, mall_id: int | None, r: ReconcileResult) -> None:
        if r.fetched or r.removed:
            self.log.info(
                "reconcile.repaired",
                type=rtype.name,
                mall_id=mall_id,
                listed=r.listed,
                fetched=r.fetched,
                removed=r.removed,
            )

    def mall_gone(self, mall_id: int) -> None:
        """`GET /malls/{id}` answered 404 (`confirm_mall_gone`): the mall is gone
        (`Mirror.malls.gone`)."""
        self.log.info("reconcile.mall_gone", mall_id=mall_id)
        self.mirror.malls.gone(mall_id)

    async def reconcile_orphans(self, rtype: ResourceType, malls: Sequence[int]) -> ReconcileResult:
        """Rows of a mall-scoped type that no mall lists: asked by `filter[id]` in every mall
        of `malls` (the upstream's); found ones are written there (their membership comes
        back), and only those no mall serves are deleted, within the guard."""
        result = ReconcileResult()
        gone: list[int] = []
        for batch in list(self.mirror.table(rtype.name).orphans()):
            found: set[int] = set()
            for mall in malls:
                rest = [i for i in batch if i not in found]
                if not rest:
                    break
                try:
                    found |= await self.evidence.fetch_found(scopes_of(rtype, [mall]), rest)
                except NotFoundError as exc:
                    await confirm_mall_gone(self.client, mall, exc)
                    continue  # that mall went too: it serves nothing
            result.fetched += len(found)
            gone += [i for i in batch if i not in found]
        if gone:
            result.local = self.mirror.table(rtype.name).count()
            limit = self._delete_limit(result.local)
            if limit is not None and len(gone) > limit:
                self._refuse(rtype, None, result, len(gone), "listed by no mall, nor by filter[id]")
            result.removed = self.mirror.table(rtype.name).delete(gone)  # no tombstone: inferred
            self.log.info("reconcile.orphans_removed", type=rtype.name, rows=result.removed)
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
        # Ids and stamps, plus the sideloads whole with each owner's linkage (`sync.jobs.malls.sideloads`).
        fields, extra = sideloads.params(scope.rtype)
        async for page in self.client.iter_pages(Listing(scope, extra, fields, include=False)):
            yield page


@dataclass
class EveryTypeResult:
    """What one reconcile of every mirrored type did: per type (fetched, removed), the
    refusals of the mass-delete guard, and the malls found gone."""

    types: dict[str, tuple[int, int]] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    malls_gone: list[int] = field(default_factory=list)
    #: Sideloaded rows no mirrored row references any more, removed per type.
    pruned: dict[str, int] = field(default_factory=dict)


async def upstream_malls(client: Reconciled) -> list[int]:
    """Every mall id the upstream lists (ids and `updated_at` only)."""
    malls = catalogue.TYPES["malls"]
    out: list[int] = []
    async for page in client.iter_pages(
        Listing(Scope(malls), fields=["updated_at"], include=False)
    ):
        out += [parse_id(r["id"]) for r in page.resources]
    return sorted(set(out))


async def reconcile_every_type(
    reconciler: Reconciler[UpstreamT],
    types: Sequence[ResourceType],
    *,
    each: Callable[[ResourceType, Awaitable[None]], Awaitable[None]] | None = None,
) -> EveryTypeResult:
    """The reconcile of every mirrored type, used by the daemon and `ccsync reconcile` alike.

    Malls first (when mirrored): they are the scopes of the mall-scoped types. Those are then
    reconciled in every mall the upstream lists *and* every mall the mirror still references
    (a mall deleted upstream answers 404 there: its memberships go), then their rows no mall
    lists any more are confirmed by `filter[id]` in every upstream mall. A refusal in one type
    or mall never stops the others. `each(rtype, work)` wraps each type's part (the daemon
    skips a type the account may not read). The deletions feed is the caller's to read first.
    """
    mirror, out = reconciler.mirror, EveryTypeResult()

    async def run(rtype: ResourceType, work: Callable[[], Awaitable[None]]) -> None:
        await (each(rtype, work()) if each is not None else work())

    malls_type = next((t for t in types if t.name == "malls"), None)
    if malls_type is not None:
        await run(malls_type, lambda: _one_type(reconciler, malls_type, [], out))
    scoped = [t for t in types if t.level == "mall"]
    upstream: list[int] = []
    if scoped:
        upstream = (
            list(mirror.table("malls").ids())
            if malls_type is not None
            else await upstream_malls(reconciler.client)
        )
    visit = sorted(set(upstream) | (mirror.malls.referenced() if scoped else set()))
    for rtype in types:
        if rtype is malls_type:
            continue
        malls = visit if rtype.level == "mall" else []

        def work(rtype: ResourceType = rtype, malls: list[int] = malls) -> Awaitable[None]:
            return _one_type(reconciler, rtype, malls, out)

        await run(rtype, work)
    live = [m for m in upstream if m not in out.malls_gone]
    await RelatedRoutes(reconciler.client, mirror).fill(types, changed_only=True)
    routes = MallRoutes(reconciler.client, mirror)
    for rtype in types:
        if rtype.name in ("contacts", "deals"):
            malls_now = live or list(mirror.table("malls").ids())

            async def routed(rtype: ResourceType = rtype, malls: list[int] = malls_now) -> None:
                await routes.refresh([rtype.name], malls)

            await run(rtype, routed)
    for rtype in scoped:

        async def orphans(rtype: ResourceType = rtype) -> None:
            try:
                result = await reconciler.reconcile_orphans(rtype, live)
            except MassDeleteRefused as exc:
                out.refusals.append(str(exc))
                return
            fetched, removed = out.types.get(rtype.name, (0, 0))
            out.types[rtype.name] = (fetched + result.fetched, removed + result.removed)

        await run(rtype, orphans)
    # Copies its listings met stamped their tombstone's very moment: `filter[id]` decides.
    await TombstoneTies(reconciler.evidence).settle(t.name for t in types)
    out.pruned = sideloads.prune(mirror)
    return out


async def _one_type(
    reconciler: Reconciler[ClientT], rtype: ResourceType, malls: Sequence[int], out: EveryTypeResult
) -> None:
    fetched = removed = 0
    for group in group_by_mall(scopes_of(rtype, malls)):
        try:
            result = await reconciler.reconcile(group)
        except MassDeleteRefused as exc:
            out.refusals.append(str(exc))
            continue
        if result.mall_gone and group[0].mall_id is not None:
            out.malls_gone.append(group[0].mall_id)
        fetched += result.fetched
        removed += result.removed
    out.types[rtype.name] = (fetched, removed)


async def run_reconcile(
    settings: Settings, *, force: bool = False
) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """One full reconcile of every mirrored type (library entry point of `ccsync reconcile`):
    type -> (fetched, removed), and the refusals (`deletions feed` -> (0, entries applied)
    comes first; then each type; then `sideloads.prune`'s rows removed per type).

    The deletions feed is applied first, so deletions it lists (a day of churn in a small
    table) are not mistaken for a glitch by the mass-delete guard. A refusal in one type or
    mall never stops the others: each is reported, and the rest is reconciled. `force` lifts
    the guard.
    """
    out: dict[str, tuple[int, int]] = {}
    async with connected(settings) as (client, mirror):
        share = None if force else settings.schedule.reconcile_max_delete_share
        reconciler = Reconciler(
            client,
            mirror,
            max_delete_share=share,
            settling=Settling(client.clock.now_ts, settings.schedule.poll_lookback_max),
        )
        types = settings.upstream.mirrored_types()
        applied = await apply_feed_first(client, mirror, settings, types)
        if applied is not None:
            out["deletions feed"] = (0, applied)
        result = await reconcile_every_type(reconciler, types)
    out.update(result.types)
    out.update({name: (0, n) for name, n in result.pruned.items()})
    return out, result.refusals
