"""The rolling proof: every scope's ids and stamps compared with the mirror once per staleness bound.

Notices, polls and the deletions feed keep the mirror fresh when the upstream behaves as they
expect; the proof bounds how stale a row can be whatever they missed. A cycle walks units in a
fixed order: each top-level type (one unit), each mall-scoped type per mall (one unit a mall,
then its orphans: rows no mall lists, `Reconciler.reconcile_orphans`), and a last unit that
refreshes the mall routes and related routes and prunes unreferenced sideloads, as the daily
reconcile did. A unit's listing is sparse (ids and stamps, `sideloads.params`), read one page
at a time into `sync.store.proof`, so a tick can stop anywhere and a restart resumes at the page
it stood at (`proof_position` in `_sync_meta`). Once a unit's listing is complete it is diffed
and repaired at once (`sync.jobs.proving.proofdiff`: guarded writes, deletions confirmed with canaries).

The daemon runs it rolling (`step`), each tick spending the requests its share of the bound
earns (`sync.jobs.proving.pacing`) at the budget's lowest priority (`Priority.PROOF`), so notices,
polls and the feed are never held up by it; `ccsync reconcile` runs one whole cycle (`run_all`).

A type is proven complete when a cycle's units of that type all ended with nothing unresolved
(no row absent and unconfirmed, no unit failed): `proof_proven` keeps, per type, when its
listing began in that cycle (everything changed before then is in the mirror), and what is
unresolved otherwise. `ccsync status` and `/metrics` show its age beside the bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sync.channel.listing import Listing
from sync.channel.paging import PAST_END
from sync.core.config import Settings
from sync.core.errors import NotFoundError, UpstreamError
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence, Settling, confirm_mall_gone
from sync.jobs.incremental.freshness import OnLag
from sync.jobs.incremental.poll import apply_feed_first
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.jobs.malls import sideloads
from sync.jobs.malls.mallincludes import _linkage, _stamps
from sync.jobs.malls.mallroutes import MallRoutes
from sync.jobs.malls.relroutes import RelatedRoutes
from sync.jobs.oneshot import connected
from sync.jobs.proving.pacing import cycle_cost
from sync.jobs.proving.position import Position
from sync.jobs.proving.proofdiff import Clocked, OnRepair, UnitDiff, scope_key
from sync.jobs.proving.reconcile import Reconciler, Upstream, upstream_malls
from sync.model.catalogue import ResourceType
from sync.model.scopes import scopes_of
from sync.model.stamps import iso_ms
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore

#: The kinds of repair counted in `sync_repairs_total{kind}` (the verify's are
#: `same_stamp_content` and `membership`; the proof's `same_stamp_content` are rows listed under
#: a stamp not yet settled, `sync.jobs.evidence.Settling`).
KINDS = ("missed_change", "missed_creation", "missed_deletion", "same_stamp_content", "membership")


@dataclass(frozen=True)
class Unit:
    """One step of a cycle: a type's listing (in one mall), its orphans, or the finish."""

    key: str
    type: str
    mall: int | None
    kind: Literal["list", "members", "orphans", "finish"]


class Proved(Upstream, Clocked, Protocol):
    """What `Proof` asks of the upstream client (`ChannelClient`, or a test's fake): what a
    reconcile of every type asks (`Upstream`), and "now" on the stamps' scale (`UnitDiff`)."""


@dataclass
class ProofReport:
    """What a proof (one whole cycle, or one rolling step) did."""

    requests: int = 0
    #: type -> kind -> rows repaired.
    repairs: dict[str, dict[str, int]] = field(default_factory=dict)
    #: type -> why its difference stays unresolved (the mass-delete guard's, a failure).
    unresolved: dict[str, str] = field(default_factory=dict)
    #: Types proven complete by a cycle that ended in this step.
    proven: list[str] = field(default_factory=list)
    cycle_done: bool = False


class Proof:
    """The rolling proof over one mirror and client; see the module docstring."""

    def __init__(
        self,
        client: Proved,
        mirror: MirrorStore,
        types: Sequence[ResourceType],
        *,
        max_delete_share: float | None,
        force: bool = False,
        on_repair: OnRepair | None = None,
        on_lag: OnLag | None = None,
        prefix: str = "",
        isolate: bool = True,
        fast: Callable[[], Sequence[str]] | None = None,
        members_page_size: int = 100,
        settling: Settling | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.types = list(types)
        self.reconciler = Reconciler(
            client, mirror, max_delete_share=max_delete_share, settling=settling
        )
        self.book = mirror.proof.book()
        self.on_repair = on_repair
        self.prefix = prefix  # keeps a one-off cycle's listing apart from the rolling one
        # Rolling: a unit that fails leaves its type unproven and the cycle goes on. One-off
        # (`ccsync reconcile`): the failure is the command's, as it always was.
        self.isolate = isolate
        # The mall-scoped types whose members `GET /malls?include=` serves (the polls' fast
        # path, `sync.jobs.malls.mallincludes`): listed for every mall in one walk of `/malls` pages,
        # a request per `members_page_size` malls, instead of a listing per mall and type.
        self.fast = fast or (lambda: ())
        self.members_page_size = members_page_size
        self.differ = UnitDiff(
            client,
            mirror,
            self.reconciler.evidence,
            self.book,
            max_delete_share=max_delete_share,
            force=force,
            on_repair=self._count,
            on_lag=on_lag,
            settling=settling,
        )
        self._report = ProofReport()
        self.log = get_logger("sync.proof")

    # -- the cycle's shape and cost ------------------------------------------------------------

    def malls(self) -> list[int]:
        """The malls the mall-scoped types are listed in: the mirror's, and those it references."""
        if not any(t.level == "mall" for t in self.types):
            return []
        return sorted(set(self.mirror.table("malls").ids()) | self.mirror.malls.referenced())

    def units(self, malls: Sequence[int]) -> list[Unit]:
        out: list[Unit] = []
        walk = bool(self._fast_names()) and bool(malls)
        for t in self.types:
            if t.level == "mall":
                if walk:
                    out.append(Unit(f"{self.prefix}@members", "", None, "members"))
                    walk = False
                out += [Unit(f"{self.prefix}{t.name}@{m}", t.name, m, "list") for m in malls]
                out.append(Unit(f"{self.prefix}{t.name}@orphans", t.name, None, "orphans"))
            else:
                out.append(Unit(f"{self.prefix}{t.name}", t.name, None, "list"))
        out.append(Unit(f"{self.prefix}@finish", "", None, "finish"))
        return out

    def cost(self, malls: Sequence[int] | None = None) -> int:
        """Requests one cycle's listings take, about (from the mirror's row counts)."""
        malls = self.malls() if malls is None else malls
        rows: list[int] = []
        fast = self._fast_names()
        if fast and malls:
            rows += [1] * -(-len(malls) // self.members_page_size)  # one request a page
        for t in self.types:
            if t.name in fast:
                continue  # in the walk of `/malls` pages above
            scopes = len(t.scope_params)
            counts = (
                [self.mirror.table(t.name).count(mall_id=m) for m in malls]
                if t.level == "mall"
                else [self.mirror.table(t.name).count()]
            )
            for n in counts:
                rows += [-(-n // scopes)] * scopes
        return cycle_cost(rows)

    def _fast_names(self) -> list[str]:
        return [t.name for t in self.types if t.level == "mall" and t.name in set(self.fast())]

    @property
    def at_cycle_start(self) -> bool:
        return self._position() is None

    # -- one whole cycle, or a step of the rolling one -----------------------------------------

    async def run_all(self) -> ProofReport:
        """One whole cycle from its start (`ccsync reconcile`); the rolling position is
        neither read nor moved."""
        self._report = report = ProofReport()
        malls = self.malls()
        units = self.units(malls)
        pos: Position | None = self._fresh()
        while pos is not None:
            pos = await self._advance(units, pos)
        report.cycle_done = True
        return report

    async def step(self, budget: int) -> ProofReport:
        """The next pages and diffs of the rolling cycle until `budget` requests are spent;
        the position is kept after each page."""
        self._report = report = ProofReport()
        units = self.units(self.malls())
        pos = self._position(units)
        while report.requests < budget:
            if pos is None:
                pos = self._fresh()
            pos = await self._advance(units, pos)
            self.mirror.proof.set_position(None if pos is None else pos.to_json())
            if pos is None:
                report.cycle_done = True
                self.mirror.meta.set("proof_cycle_finished_at", iso_ms(time.time()))
                break
        return report

    def _fresh(self) -> Position:
        self.book.clear_prefix(self.prefix)
        return Position(started_at=iso_ms(time.time()))

    def _position(self, units: Sequence[Unit] | None = None) -> Position | None:
        pos = Position.from_json(self.mirror.proof.position())
        if pos is None or units is None:
            return pos
        keys = [u.key for u in units]
        if pos.unit in keys:
            pos.index = keys.index(pos.unit)
        elif not 0 <= pos.index < len(units):
            return None  # the cycle's shape changed past where it stood: start over
        return pos

    async def _advance(self, units: Sequence[Unit], pos: Position) -> Position | None:
        """One page of the unit at `pos`, or its diff once listed; the position after it."""
        unit = units[pos.index]
        pos.unit = unit.key
        if pos.types is None:
            pos.types = {}
        types = pos.types
        if unit.type:
            types.setdefault(unit.type, {"started": iso_ms(time.time()), "unresolved": 0})
        try:
            done = await self._unit(unit, pos)
        except UpstreamError as exc:
            if not self.isolate:
                raise
            self.log.warning("proof.unit_failed", unit=unit.key, error=str(exc))
            self._unresolved(pos, unit.type, 1, f"{unit.key}: {exc}")
            done = True
        if not done:
            return pos
        nxt = pos.index + 1
        if unit.type and (nxt >= len(units) or units[nxt].type != unit.type):
            self._type_done(unit.type, types.pop(unit.type))
        if nxt >= len(units):
            return None
        return pos.next_unit(units[nxt].key, nxt)

    async def _unit(self, unit: Unit, pos: Position) -> bool:
        """Work on `unit` at `pos` (one page, or the rest at once); True when it is done."""
        if unit.kind == "finish":
            await self._finish()
            return True
        if unit.kind == "members":
            return await self._members(pos)
        rtype = next(t for t in self.types if t.name == unit.type)
        if unit.kind == "orphans":
            await self._orphans(rtype, pos)
            return True
        scopes = scopes_of(rtype, [] if unit.mall is None else [unit.mall])
        if unit.mall is not None and unit.type in (pos.walked or ()):
            pos.scope = len(scopes)  # its listing came with the walk of `/malls` pages
        if pos.scope < len(scopes):
            scope = scopes[pos.scope]
            key = scope_key(unit.key, pos.scope)
            if pos.page == 1:
                self.book.clear(key)
            fields, extra = sideloads.params(rtype)
            try:
                page = await self.client.list_page(
                    Listing(scope, extra, fields, include=False), pos.page
                )
            except UpstreamError as exc:
                if exc.status in PAST_END and pos.page > 1 and pos.promised is False:
                    # A page past what the upstream promised (`sync.channel.paging`): the end.
                    pos.scope, pos.page = pos.scope + 1, 1
                    return False
                if not isinstance(exc, NotFoundError) or unit.mall is None:
                    raise
                # Evidence about the listing, not the mall: `GET /malls/{id}` decides.
                await confirm_mall_gone(self.client, unit.mall, exc)
                self.reconciler.mall_gone(unit.mall)
                return True
            self._report.requests += 1
            sideloads.apply_page(self.mirror, rtype, page.resources, page.included)
            self.book.add(
                key,
                (
                    (parse_id(r["id"]), (r.get("attributes") or {}).get("updated_at"))
                    for r in page.resources
                ),
            )
            if self.client.paging.more(page):
                pos.page += 1
                pos.promised = page.number < page.last
            else:
                pos.scope, pos.page = pos.scope + 1, 1
            return False
        outcome = await self.differ.diff(unit.key, scopes)
        self._report.requests += outcome.requests
        if outcome.mall_gone and unit.mall is not None:
            self.reconciler.mall_gone(unit.mall)
        if outcome.unresolved:
            self._unresolved(pos, unit.type, outcome.unresolved, outcome.why or "")
        else:
            self.book.scope_proven(
                unit.type, "top" if unit.mall is None else str(unit.mall), iso_ms(time.time())
            )
        if unit.mall is None:  # a mall's listing stays until its orphans are asked (canaries)
            for i in range(len(scopes)):
                self.book.clear(scope_key(unit.key, i))
        return True

    async def _members(self, pos: Position) -> bool:
        """One page of `GET /malls?include=<fast types>`: each mall's linkage and its members'
        stamps land in the book as that (type, mall)'s listing; a type whose linkage a mall
        does not serve is listed per mall after all. True after the last page."""
        if pos.page == 1:
            pos.walked = names = self._fast_names()
            for name in names:
                self.book.clear_prefix(f"{self.prefix}{name}@")
        names = list(pos.walked or [])
        if not names:
            return True
        page, _ = await self.client.list_members(names, pos.page, size=self.members_page_size)
        self._report.requests += 1
        stamps = _stamps(page)
        for mall in page.resources:
            mall_id = parse_id(mall.get("id"))
            for name in list(names):
                ids = _linkage(mall, name)
                if ids is None:
                    names.remove(name)  # not served here: listed per mall after all
                    continue
                key = scope_key(f"{self.prefix}{name}@{mall_id}", 0)
                self.book.add(key, ((rid, stamps.get((name, rid))) for rid in ids))
        pos.walked = names
        if page.resources and page.number < page.last:
            pos.page += 1
            return False
        return True

    async def _orphans(self, rtype: ResourceType, pos: Position) -> None:
        """Rows of a mall-scoped type no mall listed (`UnitDiff.orphans`: confirmed with the
        malls' canaries); then the type's mall listings kept for those canaries go."""
        malls = (
            list(self.mirror.table("malls").ids())
            if any(t.name == "malls" for t in self.types)
            else await upstream_malls(self.client)
        )
        prefix = f"{self.prefix}{rtype.name}@"
        outcome = await self.differ.orphans(rtype, malls, prefix)
        self._report.requests += outcome.requests
        if outcome.unresolved:
            self._unresolved(pos, rtype.name, outcome.unresolved, outcome.why or "")
        self.book.clear_prefix(prefix)

    async def _finish(self) -> None:
        """What the daily reconcile did after the listings: related and mall routes, then the
        sideloaded rows no mirrored row references."""
        try:
            await RelatedRoutes(self.client, self.mirror).fill(self.types)
            routes = MallRoutes(self.client, self.mirror)
            names = [t.name for t in self.types if t.name in ("contacts", "deals")]
            if names:
                await routes.refresh(names, list(self.mirror.table("malls").ids()))
        except UpstreamError as exc:
            self.log.warning("proof.routes_failed", error=str(exc))
        pruned = sideloads.prune(self.mirror)
        if pruned:
            self.log.info("sideloads.pruned", **pruned)

    # -- what it found -------------------------------------------------------------------------

    def _count(self, type_name: str, kind: str, n: int) -> None:
        if n <= 0:
            return
        kinds = self._report.repairs.setdefault(type_name, {})
        kinds[kind] = kinds.get(kind, 0) + n
        self.mirror.proof.count_repairs(type_name, kind, n)
        if self.on_repair is not None:
            self.on_repair(type_name, kind, n)

    def _unresolved(self, pos: Position, type_name: str, n: int, why: str) -> None:
        if not type_name:
            return
        if pos.types is None:
            pos.types = {}
        entry = pos.types.setdefault(type_name, {"started": iso_ms(time.time()), "unresolved": 0})
        entry["unresolved"] = int(entry.get("unresolved", 0)) + n
        entry["why"] = why
        self._report.unresolved[type_name] = why

    def _type_done(self, type_name: str, entry: dict[str, Any]) -> None:
        unresolved = int(entry.get("unresolved", 0))
        self.mirror.proof.record_proven(
            type_name,
            at=entry.get("started"),
            unresolved=unresolved,
            why=entry.get("why"),
        )
        if unresolved == 0:
            self._report.proven.append(type_name)


async def run_proof_cycle(
    settings: Settings, *, force: bool = False
) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """One whole proof cycle (library entry point of `ccsync reconcile`): type -> (fetched,
    removed), the deletions feed's entries applied first as `deletions feed`; and what stayed
    unresolved, one line per type (exit 1). `force` accepts `filter[id]` without canaries and
    lifts the mass-delete guard."""
    out: dict[str, tuple[int, int]] = {}
    async with connected(settings) as (client, mirror):
        types = settings.upstream.mirrored_types()
        applied = await apply_feed_first(client, mirror, settings, types)
        if applied is not None:
            out["deletions feed"] = (0, applied)
        proof = Proof(
            client,
            mirror,
            types,
            max_delete_share=None if force else settings.schedule.reconcile_max_delete_share,
            force=force,
            prefix="once:",
            isolate=False,
            settling=Settling(client.clock.now_ts, settings.schedule.poll_lookback_max),
        )
        report = await proof.run_all()
        # Copies its listings met stamped their tombstone's very moment: `filter[id]` decides.
        await TombstoneTies(Evidence(client, mirror)).settle(t.name for t in types)
    for t in types:
        kinds = report.repairs.get(t.name, {})
        fetched = sum(n for k, n in kinds.items() if k != "missed_deletion")
        out[t.name] = (fetched, kinds.get("missed_deletion", 0))
    return out, [f"{name}: {why}" for name, why in sorted(report.unresolved.items())]
