"""Full verify: refetch every mirrored resource whole and repair whatever differs, stamps or not.

Polls follow `updated_at` and the reconcile compares ids and stamps, so content the upstream
changes without a new stamp (a legacy bulk SQL update, two writes in one millisecond) is never
seen by them once its notice is lost. The verify fetches each row of the mirror by `filter[id]`
(100 ids a request, in every scope of its group, with its includes) and hands the whole copies
to the compare-and-repair write (`sync.store.repair`): rows, links, to-one columns and the
sideloaded images, tags and groups that come with them. Each repair is logged
(`verify.repaired`: type, id and the names of what differed, never the values) and reported to
`on_repair` (the daemon counts them in `sync_verify_repairs_total{type}`).

Lists of "current" items on mall routes (`CURRENT_LISTS`: press releases, programs) change
membership with time, and a row's mall is known only from the route that lists it: those types
are re-listed whole, mall by mall; a row listed under another mall than the mirror's is moved,
and a row its mall no longer lists (and `filter[id]` no longer finds there) leaves that mall.
Nothing keeps such a row out (only the deletions feed writes tombstones): listed again, it is
written again, whatever its stamp.

The whole mirror is one cycle of units in a fixed order (type, then mall, then ids ascending).
`ccsync reconcile --full` runs a cycle at once (`run_all`, through `run_verify`); the daemon runs
it rolling (`step`): each tick verifies the next units within a request budget from the position
kept in the mirror's `_sync_meta` (`verify_position`), so a restart resumes the cycle where it
stopped and the request rate stays flat. Both walk the cycle through one `_advance` per unit, so
their order is one; the malls are given in ascending order (``TypeTable.ids``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any, Protocol

import orjson

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.core.config import Settings
from sync.core.errors import NotFoundError
from sync.core.logs import get_logger
from sync.jobs.evidence import Asked, Evidence, confirm_mall_gone
from sync.jobs.malls import sideloads
from sync.jobs.oneshot import connected
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms
from sync.pipeline.encoding import parse_id
from sync.pipeline.staging import stage_resources
from sync.store import MirrorStore
from sync.store.repair import Repair

#: Mall-scoped types whose mall routes list the "current" items only (spec, read operations).
CURRENT_LISTS = frozenset({"press_releases", "programs"})
#: Ids per `filter[id]` request (the spec's page maximum).
BATCH = 100
POSITION_KEY = "verify_position"


@dataclass
class VerifyReport:
    """What a verify (a whole cycle or one rolling step) did."""

    rows: int = 0
    requests: int = 0
    repairs: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    cycle_done: bool = False

    @property
    def repaired(self) -> int:
        return sum(self.repairs.values())


@dataclass(frozen=True)
class Position:
    """Where a rolling cycle stands: the next unit is in `type`, mall `mall`, ids > `after`."""

    type: str
    mall: int | None
    after: int | None
    started_at: str


class Verified(Asked, Protocol):
    """What `Verifier` asks of the upstream client (`ChannelClient`, or a test's fake):
    rows by `filter[id]`, a mall's whole listing, the evidence that a mall is gone."""

    def iter_pages(self, request: Scope | Listing, start: int = 1) -> AsyncIterator[Page]: ...


class Verifier:
    """Verifies units of the mirror against whole copies from the upstream."""

    def __init__(
        self,
        client: Verified,
        mirror: MirrorStore,
        *,
        on_repair: Callable[[Repair], None] | None = None,
    ) -> None:
        self.client = client
        self.mirror = mirror
        #: Every `filter[id]` question is the evidence part's (`sync.jobs.evidence`).
        self.evidence = Evidence(client, mirror)
        self.on_repair = on_repair
        self.log = get_logger("sync.verify")

    # -- one cycle at once ---------------------------------------------------------------------

    async def run_all(self, types: Sequence[ResourceType], malls: Sequence[int]) -> VerifyReport:
        """Verify every row of `types` from the start of a cycle (`ccsync reconcile --full`);
        the rolling position is neither read nor moved."""
        report = VerifyReport()
        pos = self._start(types, malls, iso_ms(time.time())) if types else None
        while pos is not None:
            pos = await self._advance(types, malls, pos, report)
        self._prune(report)
        report.cycle_done = True
        return report

    # -- rolling ------------------------------------------------------------------------------

    def cost(self, types: Sequence[ResourceType], malls: Sequence[int]) -> int:
        """Requests one whole cycle takes, about (from the mirror's row counts)."""
        total = 0
        for rtype in types:
            scopes = len(rtype.scope_params)
            if rtype.level == "mall":
                for mall in malls:
                    total += scopes * (
                        -(-self.mirror.table(rtype.name).count(mall_id=mall) // BATCH)
                    )
                total += len(malls) if rtype.name in CURRENT_LISTS else 0
            else:
                total += scopes * (-(-self.mirror.table(rtype.name).count() // BATCH))
        return max(total, 1)

    async def step(
        self, types: Sequence[ResourceType], malls: Sequence[int], budget: int
    ) -> VerifyReport:
        """Verify the next units of the cycle until `budget` requests are spent; the position
        is kept after each unit. `cycle_done` when the cycle ended (the next step starts over)."""
        report = VerifyReport()
        if not types:
            report.cycle_done = True
            return report
        pos = self._position(types)
        while report.requests < budget:
            if pos is None:
                pos = self._start(types, malls, iso_ms(time.time()))
            pos = await self._advance(types, malls, pos, report)
            if pos is None:
                self._prune(report)
                report.cycle_done = True
                self.mirror.meta.set(POSITION_KEY, None)
                self.mirror.meta.set("verify_cycle_finished_at", iso_ms(time.time()))
                return report
            self.mirror.meta.set(POSITION_KEY, orjson.dumps(asdict(pos)).decode())
        return report

    # -- the cycle's walk, one unit at a time (`run_all` and `step` alike) ---------------------

    @staticmethod
    def _start(types: Sequence[ResourceType], malls: Sequence[int], at: str) -> Position:
        return Position(types[0].name, _first(types[0], malls), None, at)

    async def _advance(
        self,
        types: Sequence[ResourceType],
        malls: Sequence[int],
        pos: Position,
        report: VerifyReport,
    ) -> Position | None:
        """Verify the unit at `pos` (a batch of ids, or a "current" type's whole re-listing);
        the position after it, None at the end of the cycle."""
        rtype = next(t for t in types if t.name == pos.type)
        if rtype.name in CURRENT_LISTS:
            await self.verify_current(rtype, malls, report)
            return self._next_unit(types, malls, pos)
        ids = self._next_ids(rtype, pos.mall, pos.after)
        if not ids:
            return self._next_unit(types, malls, pos)
        await self.verify_ids(scopes_of(rtype, _one(pos.mall)), ids, report)
        return Position(pos.type, pos.mall, ids[-1], pos.started_at)

    def _position(self, types: Sequence[ResourceType]) -> Position | None:
        raw = self.mirror.meta.get(POSITION_KEY)
        if not raw:
            return None
        try:
            data: dict[str, Any] = orjson.loads(raw)
            pos = Position(data["type"], data["mall"], data["after"], data["started_at"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
        if not any(t.name == pos.type for t in types):
            return None  # the configured types changed: start the cycle over
        return pos

    def _next_unit(
        self, types: Sequence[ResourceType], malls: Sequence[int], pos: Position
    ) -> Position | None:
        """The position after the (type, mall) of `pos` is finished: its next mall, or the
        next type; None at the end of the cycle."""
        names = [t.name for t in types]
        i = names.index(pos.type)
        rtype = types[i]
        if rtype.level == "mall" and rtype.name not in CURRENT_LISTS:
            later = [m for m in malls if pos.mall is not None and m > pos.mall]
            if later:
                return Position(pos.type, later[0], None, pos.started_at)
        if i + 1 >= len(types):
            return None
        nxt = types[i + 1]
        return Position(nxt.name, _first(nxt, malls), None, pos.started_at)

    # -- units --------------------------------------------------------------------------------

    def _next_ids(self, rtype: ResourceType, mall: int | None, after: int | None) -> list[int]:
        if rtype.level == "mall" and mall is None:
            return []  # no malls mirrored: nothing of a mall-scoped type can be fetched
        return list(islice(self.mirror.table(rtype.name).ids(mall_id=mall, after=after), BATCH))

    async def verify_ids(
        self, scopes: Sequence[Scope], ids: Sequence[int], report: VerifyReport
    ) -> set[int]:
        """Fetch `ids` whole in every scope of their group (`Evidence.ask`, writing through
        `Mirror.repair`); repair what differs; returns the ids found. Ids found in no scope are left to the reconcile (deletions are its job,
        with its guard)."""
        report.rows += len(ids)
        verdict = await self.evidence.ask(
            scopes[0].rtype,
            {scopes[0].mall_id: ids},
            within=scopes,
            repaired=lambda repairs: self._repaired(repairs, report),
        )
        report.requests += verdict.requests
        return verdict.served | set(verdict.refused)

    async def verify_current(
        self, rtype: ResourceType, malls: Sequence[int], report: VerifyReport
    ) -> None:
        """Re-list a "current" type mall by mall, whole; repair rows and membership."""
        listed: set[tuple[int, int]] = set()
        for mall in malls:
            for scope in scopes_of(rtype, [mall]):
                try:
                    async for page in self.client.iter_pages(scope):
                        report.requests += 1
                        report.rows += len(page.resources)
                        listed.update((parse_id(r["id"]), mall) for r in page.resources)
                        if page.resources:
                            self._repaired(
                                self.mirror.repair(
                                    stage_resources(rtype, page.resources, page.included, mall)
                                ),
                                report,
                            )
                except NotFoundError as exc:
                    await confirm_mall_gone(self.client, mall, exc)
                    continue  # the mall is gone: the reconcile removes its rows
        for mall in malls:
            unlisted = [
                i
                for i in self.mirror.table(rtype.name).ids(mall_id=mall)
                if (i, mall) not in listed
            ]
            for start in range(0, len(unlisted), BATCH):
                chunk = unlisted[start : start + BATCH]
                # A listing paged by number can skip a row: ask for each before removing it.
                found = await self.verify_ids(scopes_of(rtype, [mall]), chunk, report)
                left = [i for i in chunk if i not in found]
                if left:
                    # Left this mall's "current" list: a change of membership. The row stays
                    # while another mall lists it (the reconcile removes it once none does).
                    self.mirror.table(rtype.name).remove_memberships(mall, left)
                    for rid in left:
                        self._repaired([Repair(rtype.name, rid, ("membership",))], report)

    def _repaired(self, repairs: Sequence[Repair], report: VerifyReport) -> None:
        for r in repairs:
            report.repairs[r.type] = report.repairs.get(r.type, 0) + 1
            self.log.warning(
                "verify.repaired",
                type=r.type,
                id=r.id,
                differed=",".join(r.what),
                hint="the upstream changed this row without a new updated_at (or its notice "
                "was lost); the mirror now holds the served copy",
            )
            if self.on_repair is not None:
                self.on_repair(r)

    def _prune(self, report: VerifyReport) -> None:
        """Sideloaded rows that repaired links no longer reference."""
        for name, n in sideloads.prune(self.mirror).items():
            report.removed[name] = report.removed.get(name, 0) + n


async def run_verify(settings: Settings) -> VerifyReport:
    """One whole verify cycle with the given settings: every mirrored row refetched whole by
    id, and every row, link and sideloaded row whose content differs repaired, even under an
    equal `updated_at` (library entry point of `ccsync reconcile --full`)."""
    async with connected(settings) as (client, mirror):
        verifier = Verifier(client, mirror)
        return await verifier.run_all(
            settings.upstream.mirrored_types(), list(mirror.table("malls").ids())
        )


def _first(rtype: ResourceType, malls: Sequence[int]) -> int | None:
    return (malls[0] if malls else None) if rtype.level == "mall" else None


def _one(mall: int | None) -> list[int]:
    return [] if mall is None else [mall]
