"""The proof's diff of one unit: its completed listing against the mirror, repaired at once.

A unit is one (type, mall) group of scopes (`sync.jobs.proving.proof`). Its listing (ids and stamps,
kept page by page in `sync.store.proof`) is diffed with the reconcile's `Listing`:

- listed ids the mirror lacks, or holds with an older stamp, or holds under the stamp listed
  while that stamp is not yet settled (`Settling`: a second version may share it), are fetched
  by `filter[id]` and written through the compare-and-repair write (`Evidence.refetch`): a
  `missed_creation`, a `missed_change` or a `same_stamp_content` only when the mirror holds
  them afterwards and they differed; one it refused (a tombstone, a value) is unresolved with
  why, never "repaired";
- a mall listing's rows the mirror does not know in that mall join it, and rows it lacks leave
  it once `filter[id]` in that mall agrees, with that mall's canaries: `membership` (the row
  itself stays);
- a top-level row the listing lacks is a deletion only when `filter[id]` confirms it in every
  scope of the group, and each confirmation request carries canaries: ids of that scope's
  listing (its most recently changed rows, known alive), asked in the same request. A canary
  answered "gone" too means the answer is not evidence (an upstream answering empty for
  everything): nothing is deleted, and the rows stay unresolved (`unconfirmed`), which the
  mass-delete guard reports. Confirmed deletions are `missed_deletion`, never held by the
  guard. `force` (`ccsync reconcile --force`) accepts `filter[id]` without canaries.

Every question goes through `Evidence.ask` (where, batches, a listing's 404, canaries, the write
and what the mirror holds after it); this module decides only what the answers mean for a
unit's listing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sync.channel.client import MAX_IDS
from sync.channel.clock import UpstreamClock
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence, Settling
from sync.jobs.incremental.freshness import OnLag, lags
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.store import MirrorStore
from sync.store.seamparts import ProofBookPart

#: Canaries asked with each confirmation request, per scope.
CANARIES = 2
#: Requests per scope, each with the next canaries, before a confirmation is doubted.
CANARY_TRIES = 3

#: Told (type, kind, rows) of each repair: the daemon counts them (`sync_repairs_total`).
OnRepair = Callable[[str, str, int], None]


class MallGone(Exception):
    """A mall's listing answered 404 and `GET /malls/{id}` agreed: the mall is gone."""

    def __init__(self, mall_id: int) -> None:
        super().__init__(f"mall {mall_id} is gone")
        self.mall_id = mall_id


def scope_key(unit: str, index: int) -> str:
    """The listing key of scope `index` of `unit`."""
    return f"{unit}#{index}"


@dataclass
class UnitOutcome:
    """What one unit's diff did."""

    requests: int = 0
    repaired: dict[str, int] = field(default_factory=dict)
    #: Rows whose difference stays: absent from the listing, not confirmed gone.
    unresolved: int = 0
    why: str | None = None
    mall_gone: bool = False


class Clocked(Protocol):
    """What `UnitDiff` asks of the upstream client (`ChannelClient`, or a test's fake): "now"
    on the stamps' scale (the lags it reports); the rows it asks go through `Evidence`."""

    clock: UpstreamClock


class UnitDiff:
    """Diffs a completed unit listing with the mirror and repairs what differs."""

    def __init__(
        self,
        client: Clocked,
        mirror: MirrorStore,
        evidence: Evidence,
        book: ProofBookPart,
        *,
        max_delete_share: float | None,
        force: bool = False,
        on_repair: OnRepair | None = None,
        on_lag: OnLag | None = None,
        settling: Settling | None = None,
    ) -> None:
        self.client = client
        self.settling = settling
        self.mirror = mirror
        self.evidence = evidence
        self.book = book
        self.max_delete_share = max_delete_share
        self.force = force
        self.on_repair = on_repair
        self.on_lag = on_lag
        self.log = get_logger("sync.proof")

    def repaired(self, out: UnitOutcome, type_name: str, kind: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        out.repaired[kind] = out.repaired.get(kind, 0) + len(ids)
        self.log.info(
            "proof.repaired", type=type_name, kind=kind, rows=len(ids), ids=list(ids)[:50]
        )
        if self.on_repair is not None:
            self.on_repair(type_name, kind, len(ids))

    def _refused(self, out: UnitOutcome, type_name: str, refused: dict[int, str]) -> None:
        """Rows the listing served that the mirror does not hold after the write: unresolved,
        with why (never counted as repaired)."""
        out.unresolved += len(refused)
        first = next(iter(refused.values()))
        why = f"{len(refused)} rows served were not taken by the mirror ({first})"
        out.why = why if out.why is None else f"{out.why}; {why}"
        self.log.error(
            "proof.unresolved",
            type=type_name,
            rows=len(refused),
            ids=sorted(refused)[:50],
            why=first,
            hint="the upstream serves rows the mirror refuses; they stay unresolved in "
            "ccsync status until a later cycle writes them",
        )

    async def diff(self, unit: str, scopes: Sequence[Scope]) -> UnitOutcome:
        """Diff and repair `unit` (its listing complete in the book); see the module docstring."""
        rtype, mall_id = scopes[0].rtype, scopes[0].mall_id
        out = UnitOutcome()
        listed_stamps: dict[int, str | None] = {}
        with self.mirror.table(rtype.name).listing(mall_id) as listing:
            for i in range(len(scopes)):
                rows = list(self.book.listed(scope_key(unit, i)))
                listing.add(rows)
                listed_stamps.update(rows)
            joined = listing.claim_mall()
            if joined:
                out.repaired["membership"] = out.repaired.get("membership", 0) + joined
                self.log.info("proof.repaired", type=rtype.name, kind="membership", rows=joined)
                if self.on_repair is not None:
                    self.on_repair(rtype.name, "membership", joined)
            since = self.settling.since() if self.settling is not None else None
            for ids in listing.missing_or_stale(since):
                got = await self.evidence.refetch(scopes, ids)
                out.requests += got.verdict.requests
                self.repaired(out, rtype.name, "missed_creation", got.created)
                self.repaired(out, rtype.name, "missed_change", got.changed)
                self.repaired(out, rtype.name, "same_stamp_content", got.same_stamp)
                if got.verdict.refused:
                    self._refused(out, rtype.name, got.verdict.refused)
                if self.on_lag is not None and (got.created or got.changed):
                    now = self.client.clock.now_ts()
                    self.on_lag(
                        rtype.name,
                        "proof",
                        lags((listed_stamps[i] for i in got.created + got.changed), now),
                    )
            absent = [i for batch in listing.absent() for i in batch]
            listed, local = listing.counts()
        if not absent:
            return out
        if mall_id is not None:
            await self._left_mall(unit, scopes, absent, out)
        else:
            await self._gone(unit, scopes, absent, (listed, local), out)
        return out

    async def _left_mall(
        self, unit: str, scopes: Sequence[Scope], absent: list[int], out: UnitOutcome
    ) -> None:
        """Absent from a mall's listing: left the mall once `filter[id]` there agrees, each
        request with canaries from that mall's listing (`_ask`). A canary known alive answered
        gone too makes the answer no evidence: the memberships stay, unresolved. A mall that
        lists nothing has no canary to ask, and its answer is taken: a membership is not a row
        (the row stays; the orphans' pass, with every mall's canaries, decides whether it is
        gone)."""
        rtype, mall_id = scopes[0].rtype, scopes[0].mall_id
        assert mall_id is not None
        doubted: list[int] = []
        step = MAX_IDS - (0 if self.force else CANARIES)
        for start in range(0, len(absent), step):
            chunk = absent[start : start + step]
            still: set[int] = set()
            verdicts: set[str] = set()
            try:
                for i, scope in enumerate(scopes):
                    served, verdict = await self._ask(scope_key(unit, i), scope, chunk, out)
                    still |= served
                    verdicts.add(verdict)
            except MallGone:  # `GET /malls/{id}` agreed (else raised: a failure)
                out.mall_gone = True
                return
            left = [i for i in chunk if i not in still]
            if "doubt" in verdicts:
                doubted += left
                continue
            removed = self.mirror.table(rtype.name).remove_memberships(mall_id, left)
            if removed:
                self.repaired(out, rtype.name, "membership", left[:removed])
        if doubted:
            out.unresolved += len(doubted)
            out.why = (
                f"{len(doubted)} rows absent from mall {mall_id}'s listing could not be confirmed "
                "to have left it (a canary known alive was answered gone too); their "
                "memberships stay"
            )
            self.log.error(
                "proof.unconfirmed",
                type=rtype.name,
                mall_id=mall_id,
                rows=len(doubted),
                ids=doubted[:50],
                hint="the upstream's filter[id] answers are not trustworthy now; the "
                "memberships stay until a later cycle confirms them",
            )

    async def _gone(
        self,
        unit: str,
        scopes: Sequence[Scope],
        absent: list[int],
        counts: tuple[int, int],
        out: UnitOutcome,
    ) -> None:
        """Absent from a top-level listing: deleted once confirmed (canaries), else unresolved."""
        rtype = scopes[0].rtype
        listed, local = counts
        unconfirmed: list[int] = []
        step = MAX_IDS - (0 if self.force else CANARIES)
        for start in range(0, len(absent), step):
            chunk = absent[start : start + step]
            gone, doubtful = await self._confirm(unit, scopes, chunk, out)
            unconfirmed += doubtful
            if gone:
                self.mirror.table(rtype.name).delete(gone)
                self.repaired(out, rtype.name, "missed_deletion", gone)
        if not unconfirmed:
            return
        out.unresolved = len(unconfirmed)
        limit = (
            None if self.max_delete_share is None else max(int(local * self.max_delete_share), 10)
        )
        guarded = limit is not None and len(unconfirmed) > limit
        out.why = (
            f"{len(unconfirmed)} of {local} rows absent from the listing could not be confirmed "
            + (
                "gone (the upstream listed none: no canary to prove its answers)"
                if listed == 0
                else "gone (a canary known alive was answered gone too)"
            )
            + ("; the mass-delete guard holds them" if guarded else "")
            + "; nothing was deleted"
        )
        self.log.error(
            "proof.unconfirmed",
            type=rtype.name,
            rows=len(unconfirmed),
            local_rows=local,
            ids=unconfirmed[:50],
            guard=guarded,
            hint="the upstream's listing or filter[id] answers are not trustworthy now; the "
            "rows stay until a later cycle confirms them (or `ccsync reconcile --force`)",
        )

    async def _confirm(
        self, unit: str, scopes: Sequence[Scope], ids: list[int], out: UnitOutcome
    ) -> tuple[list[int], list[int]]:
        """(confirmed gone, not confirmed) of `ids`: `filter[id]` in every scope of the unit,
        each request with its canaries (`_ask`). Evidence when no scope's canaries were
        answered gone and some scope's came back (`force`: `filter[id]` alone)."""
        still: set[int] = set()
        verdicts: set[str] = set()
        for i, scope in enumerate(scopes):
            served, verdict = await self._ask(scope_key(unit, i), scope, ids, out)
            still |= served
            verdicts.add(verdict)
        rest = [i for i in ids if i not in still]
        if self.force or ("doubt" not in verdicts and "trusted" in verdicts):
            return rest, []
        return [], rest

    async def _ask(
        self, key: str, scope: Scope, ids: list[int], out: UnitOutcome
    ) -> tuple[set[int], str]:
        """`filter[id]` for `ids` in `scope` with canaries from the listing kept under `key`
        (`Evidence.ask`); the ids served (rewritten) and a verdict: `trusted` (the canaries
        came back), `doubt` (they did not), `blind` (the listing had no row to ask). A canary
        may itself have left the scope meanwhile (a deal made Private, a row deleted): the
        request is asked again with the next canaries, `CANARY_TRIES` times at most, before
        its answer is doubted. A mall `GET /malls/{id}` found gone raises `MallGone`."""

        def canaries(_: Scope, attempt: int) -> list[int]:
            return self.book.canaries(key, CANARIES, attempt * CANARIES)

        verdict = await self.evidence.ask(
            scope.rtype,
            {scope.mall_id: ids},
            canaries=None if self.force else canaries,
            within=[scope],
        )
        out.requests += verdict.requests
        if verdict.refused:
            self._refused(out, scope.rtype.name, verdict.refused)
        if scope.mall_id is not None and scope.mall_id in verdict.malls_gone:
            raise MallGone(scope.mall_id)
        served = verdict.served | set(verdict.refused)
        if self.force:
            return served, "trusted"
        if verdict.doubted:
            return served, "doubt"
        return served, "trusted" if verdict.trusted else "blind"

    async def orphans(self, rtype: ResourceType, malls: Sequence[int], prefix: str) -> UnitOutcome:
        """Rows of a mall-scoped type no mall listed in this cycle: asked by `filter[id]` in
        every mall of `malls` (the upstream's), with canaries from that mall's listing (kept
        under `prefix` + mall). Found ones are written there (their membership comes back);
        the others are deleted when the answers are evidence, else left unresolved."""
        out = UnitOutcome()
        unconfirmed: list[int] = []
        step = MAX_IDS - (0 if self.force else CANARIES)
        batches = [
            b[i : i + step]
            for b in self.mirror.table(rtype.name).orphans()
            for i in range(0, len(b), step)
        ]
        for batch in batches:
            found: set[int] = set()
            verdicts: set[str] = set()
            for mall in malls:
                rest = [i for i in batch if i not in found]
                if not rest:
                    break
                (scope,) = scopes_of(rtype, [mall])
                try:
                    served, verdict = await self._ask(
                        scope_key(f"{prefix}{mall}", 0), scope, rest, out
                    )
                except MallGone:  # `GET /malls/{id}` agreed (else raised: a failure)
                    continue  # that mall went too: it serves nothing
                found |= served
                verdicts.add(verdict)
            self.repaired(out, rtype.name, "membership", sorted(found))
            rest = [i for i in batch if i not in found]
            if not rest:
                continue
            if self.force or ("doubt" not in verdicts and "trusted" in verdicts):
                self.mirror.table(rtype.name).delete(rest)
                self.repaired(out, rtype.name, "missed_deletion", rest)
            else:
                unconfirmed += rest
        if unconfirmed:
            out.unresolved = len(unconfirmed)
            out.why = (
                f"{len(unconfirmed)} rows no mall lists could not be confirmed gone (a canary "
                "known alive was answered gone too, or no mall listed a row to ask); nothing "
                "was deleted"
            )
            self.log.error(
                "proof.unconfirmed", type=rtype.name, rows=len(unconfirmed), ids=unconfirmed[:50]
            )
        return out
