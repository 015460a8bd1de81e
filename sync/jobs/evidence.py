"""Evidence: the one place that asks the upstream what a row's fate is, and writes the answer.

Every path that must know whether rows live asks here (`Evidence.ask`) and gets a `Verdict`
back: the queue worker's notices, the polls' and the feed's ties, copies tied with their
tombstones (`sync.jobs.incremental.tombstoneties`), rows created again (`sync.jobs.incremental.recreated`), the proof's
diff (`sync.jobs.proving.proofdiff`), the reconcile and the backfill's missed-row pass
(`sync.jobs.proving.reconcile`), and a mall-scoped row's memberships. The rules, once:

- **Where.** `filter[id]` in every scope of a group: a type's top-level scopes (each deal
  visibility), or one mall's; a row asked in several groups is served if any serves it.
- **How much.** `MAX_IDS` ids a request (the spec's `filter[id]` list), less the canaries; the
  client reads every page of an answer, so an upstream serving fewer rows a page loses none.
- **A listing's 404.** A mall's listing that answers 404 says nothing of the mall: `GET
  /malls/{id}` decides, once per mall per `Evidence` (`confirm_mall_gone`): gone, its ids are
  not asked there (`Verdict.malls_gone`); served, `ListingMissingError` (a failure of that
  scope, never a deletion).
- **Canaries.** Ids known alive may ride along in each request (`Canaries`, the proof's
  listing): one answered gone too makes absence no evidence (`Verdict.doubted`), asked again
  with the next canaries `CANARY_TRIES` times at most.
- **The write.** What is served is written through the guarded page write (or, for the
  rolling verify, `Mirror.repair`, which also says which rows differed: `repaired`). A copy within the
  window of a tombstone that existed before the request was sent is taken (`filter[id]` served
  it after the deletion was recorded: `TypeTable.vouched`), never refused for good.
- **No claim without the data.** A row counts as served (`Verdict.served`) only when the mirror
  holds it afterwards at the version served or newer; otherwise it is `Verdict.refused`, with
  why (a tombstone, a value the mirror refused). Callers report those unresolved, never
  repaired.
- **When an equal stamp proves the same version** (`Settling`). A listing's stamp equal to the
  mirror's says nothing yet while a second version under that stamp can still become visible:
  stamps of whole seconds let two versions of a row share one, and a change may commit late by
  as much as the polls' lookback covers (`[schedule] poll_lookback_max`). Rows listed under
  their mirrored stamp within that horizon of now are asked again by the paths that compare a
  listing with the mirror (the proof's diff, the reconcile) and compared whole (`refetch`):
  only content that differed is claimed, as `same_stamp`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sync.channel.client import MAX_IDS
from sync.channel.pages import Page
from sync.core.errors import ListingMissingError, NotFoundError
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms, normalize_or_none
from sync.pipeline.encoding import id_or_none
from sync.pipeline.staging import stage_resources
from sync.store import MirrorStore
from sync.store.deletions import TIE_WINDOW_SECONDS
from sync.store.repair import Repair

#: Requests per scope, each with the next canaries, before an answer is doubted.
CANARY_TRIES = 3


class Asked(Protocol):
    """What evidence asks of the upstream client (`ChannelClient`, or a test's fake)."""

    async def fetch_ids(self, scope: Scope, ids: Sequence[str | int]) -> Page: ...

    async def resource(self, rtype: ResourceType, rid: int | str) -> dict[str, Any]: ...


#: Ids known alive in a scope to ask beside the rows, per round (0 first).
Canaries = Callable[[Scope, int], list[int]]
#: Told the rows a verify's write found different (`Mirror.repair`).
Repaired = Callable[[list[Repair]], None]


async def confirm_mall_gone(client: Asked, mall_id: int | str, exc: NotFoundError) -> None:
    """A listing of mall `mall_id` answered 404 (`exc`) on a page it was expected to serve:
    that is evidence about the listing, not the mall. `GET /malls/{id}` decides: its 404
    returns (the mall is gone; the caller removes it); a mall it serves raises
    `ListingMissingError` naming the listing, a failure of that scope, never a deletion."""
    try:
        await client.resource(catalogue.TYPES["malls"], mall_id)
    except NotFoundError:
        return
    raise ListingMissingError(
        f"a listing of mall {mall_id} answered 404 while GET /malls/{mall_id} serves the mall",
        url=exc.url,
        status=404,
        hint="the upstream lost that listing; nothing was deleted, it is asked again next run",
    ) from exc


@dataclass(frozen=True)
class Settling:
    """The horizon within which an equal stamp is not yet evidence of the same version (module
    docstring): `now` on the stamps' scale (`UpstreamClock.now_ts`), and the lateness the polls
    cover (`[schedule] poll_lookback_max`)."""

    now: Callable[[], float]
    ceiling: float

    def since(self) -> str:
        """The oldest stamp under which the mirror's copy may still differ from the version the
        upstream will serve: a stamp's granularity (a second, `TIE_WINDOW_SECONDS`) and the
        ceiling of lateness behind now."""
        return iso_ms(self.now() - self.ceiling - TIE_WINDOW_SECONDS)


@dataclass
class Refetched:
    """What rows a listing showed missing, stale or unsettled turned out to be (`refetch`)."""

    verdict: Verdict
    #: Not held before, held now.
    created: list[int] = field(default_factory=list)
    #: Held before under another stamp, held now under the one served.
    changed: list[int] = field(default_factory=list)
    #: Held before under the stamp served, with content that differed (`Mirror.repair`).
    same_stamp: list[int] = field(default_factory=list)

    @property
    def repaired(self) -> int:
        return len(self.created) + len(self.changed) + len(self.same_stamp)


@dataclass
class Verdict:
    """What the upstream answered about the rows asked (module docstring)."""

    #: Served, and held by the mirror afterwards at that version or newer.
    served: set[int] = field(default_factory=set)
    #: Served in no scope asked, every answer trustworthy (canaries back, or none asked for).
    gone: set[int] = field(default_factory=set)
    #: Served in no scope, but an answer was doubted (a canary known alive came back gone).
    doubted: set[int] = field(default_factory=set)
    #: Served, yet not held by the mirror afterwards: why.
    refused: dict[int, str] = field(default_factory=dict)
    #: Malls `GET /malls/{id}` found gone (their listings answered 404).
    malls_gone: set[int] = field(default_factory=set)
    requests: int = 0
    #: Whether some answer came with its canaries, and whether one had none to ask.
    trusted: bool = False
    blind: bool = False


def _scopes(rtype: ResourceType, mall: int | None, within: Sequence[Scope] | None) -> list[Scope]:
    """The scopes of a group: `within`'s of that mall when given, else all of them."""
    if within is not None:
        return [s for s in within if s.mall_id == mall]
    return scopes_of(rtype, [mall] if mall is not None else [])


class Evidence:
    """Asks `filter[id]` and writes the answers (module docstring)."""

    def __init__(self, client: Asked, mirror: MirrorStore) -> None:
        self.client = client
        self.mirror = mirror
        #: Malls found gone by this part (asked once each).
        self._gone_malls: set[int] = set()

    # -- the one question ------------------------------------------------------------------

    async def ask(
        self,
        rtype: ResourceType,
        groups: Mapping[int | None, Sequence[int]],
        *,
        canaries: Canaries | None = None,
        within: Sequence[Scope] | None = None,
        repaired: Repaired | None = None,
    ) -> Verdict:
        """Ask for the ids of each group (a mall, or None: `rtype`'s top-level scopes) by
        `filter[id]` in every scope of the group (of those `within`, when given), write what
        is served, and say each id's fate."""
        out = Verdict()
        asked: set[int] = set()
        doubted: set[int] = set()
        served: dict[int, str | None] = {}
        step = MAX_IDS - (2 if canaries is not None else 0)
        for mall, ids in groups.items():
            if mall is not None and mall in self._gone_malls:
                out.malls_gone.add(mall)
                continue
            wanted = list(dict.fromkeys(ids))
            asked.update(wanted)
            try:
                for start in range(0, len(wanted), step):
                    chunk = wanted[start : start + step]
                    for scope in _scopes(rtype, mall, within):
                        got, doubt = await self._one(scope, chunk, canaries, out, repaired)
                        served.update(got)
                        if doubt:
                            doubted.update(chunk)
            except NotFoundError as exc:
                if mall is None:
                    raise
                await confirm_mall_gone(self.client, mall, exc)  # else raised: a failure
                self._gone_malls.add(mall)
                out.malls_gone.add(mall)
        out.served, out.refused = self._held(rtype, served)
        missing = asked - set(served)
        out.doubted = missing & doubted
        out.gone = missing - doubted
        return out

    async def _one(
        self,
        scope: Scope,
        ids: list[int],
        canaries: Canaries | None,
        out: Verdict,
        repaired: Repaired | None = None,
    ) -> tuple[dict[int, str | None], bool]:
        """One request (with canaries: up to `CANARY_TRIES`) for `ids` in `scope`, written;
        the ids served with their stamps, and whether the answer is doubted."""
        served: dict[int, str | None] = {}
        table = self.mirror.table(scope.rtype.name)
        for attempt in range(CANARY_TRIES if canaries is not None else 1):
            extra = [
                c
                for c in (canaries(scope, attempt) if canaries is not None else [])
                if c not in ids
            ]
            before = set(table.tombstones(ids)) if table.exists else set()
            out.requests += 1
            page = await self.client.fetch_ids(scope, [*ids, *extra])
            answer = self._write(scope, page, before, repaired)
            served.update((i, s) for i, s in answer.items() if i in ids)
            if canaries is None:
                return served, False
            if not extra:  # none to ask; after a doubted round: none left to ask
                out.blind = out.blind or attempt == 0
                return served, attempt > 0
            if set(extra) <= set(answer):
                out.trusted = True
                return served, False
        return served, True

    def _write(
        self, scope: Scope, page: Page, before: set[int], repaired: Repaired | None = None
    ) -> dict[int, str | None]:
        """Write what `page` serves; copies the write held for `filter[id]` (within the window
        of a tombstone that existed before the request) are taken. The ids served, with their
        normalised `updated_at`."""
        rtype = scope.rtype
        if not page.resources:
            # None of them served, but the type's scripts may have changed.
            self.mirror.write_scripts(rtype, page.meta.get("scripts"))
            return {}
        table = self.mirror.table(rtype.name)
        staged = stage_resources(rtype, page.resources, page.included, scope.mall_id)
        if repaired is not None:
            repaired(self.mirror.repair(staged, scripts=page.meta.get("scripts")))
        else:
            self.mirror.write_staged(staged, scripts=page.meta.get("scripts"))
        answer = {
            rid: normalize_or_none((r.get("attributes") or {}).get("updated_at"))
            for r in page.resources
            if (rid := id_or_none(r.get("id"))) is not None
        }
        if before and (ties := table.tombstone_ties()):
            mine = {i: m for i, m in ties.items() if i in before and i in answer}
            others = {i: m for i, m in ties.items() if i not in mine}
            if others:
                table.note_ties(others)
            if mine:
                again = [r for r in page.resources if id_or_none(r.get("id")) in mine]
                with table.vouched(mine):
                    self.mirror.write_staged(
                        stage_resources(rtype, again, page.included, scope.mall_id)
                    )
        return answer

    def _held(
        self, rtype: ResourceType, served: Mapping[int, str | None]
    ) -> tuple[set[int], dict[int, str]]:
        """Of the rows served, those the mirror holds at the version served or newer, and why
        each other one is not held."""
        if not served:
            return set(), {}
        table = self.mirror.table(rtype.name)
        ids = list(served)
        have = table.stamps(ids)
        held = {i for i in ids if i in have and (have[i] or "") >= (served[i] or "")}
        missing = [i for i in ids if i not in held]
        if not missing:
            return held, {}
        tombs = table.tombstones(missing)
        why = {
            i: (
                f"a tombstone of {tombs[i]} refuses the copy stamped {served[i]}"
                if i in tombs
                else "the mirror refused the copy served (a value or stamp it cannot take)"
            )
            for i in missing
        }
        return held, why

    # -- what the paths ask, in their words --------------------------------------------------

    async def fetch_found(self, scopes: Sequence[Scope], ids: Sequence[int]) -> set[int]:
        """`ids` asked in the group of `scopes` (one mall, or the top-level scopes), written;
        the ids the mirror now holds as served."""
        verdict = await self.ask(scopes[0].rtype, {scopes[0].mall_id: ids}, within=scopes)
        return verdict.served

    async def refetch(self, scopes: Sequence[Scope], ids: Sequence[int]) -> Refetched:
        """`ids` (a batch of `Listing.missing_or_stale`) asked in the group of `scopes`, written
        whole through the compare-and-repair write: which were created, which changed stamp,
        which differed under the stamp the mirror held; rows already as served are none."""
        rtype = scopes[0].rtype
        table = self.mirror.table(rtype.name)
        before = table.stamps(ids) if table.exists else {}
        differed: list[Repair] = []
        verdict = await self.ask(
            rtype, {scopes[0].mall_id: ids}, within=scopes, repaired=differed.extend
        )
        after = table.stamps([i for i in ids if i in verdict.served])
        same = {r.id for r in differed if r.type == rtype.name and "missing" not in r.what}
        out = Refetched(verdict)
        for i in ids:
            if i not in verdict.served:
                continue
            if i not in before:
                out.created.append(i)
            elif after.get(i) != before[i]:
                out.changed.append(i)
            elif i in same:
                out.same_stamp.append(i)
        return out

    async def fetch_and_write(self, scopes: Sequence[Scope], ids: Sequence[int]) -> int:
        """`fetch_found`, counted."""
        return len(await self.fetch_found(scopes, ids))

    async def fetch_in_malls(
        self, rtype: ResourceType, groups: Mapping[int | None, Sequence[int]]
    ) -> tuple[int, set[int]]:
        """`ask` for groups of ids (a mall gone is skipped: its members go with it, by the
        feed or the proof); the requests made and the ids served."""
        verdict = await self.ask(rtype, groups)
        return verdict.requests, verdict.served

    async def confirm_gone(self, scopes: Sequence[Scope], ids: Sequence[int]) -> list[int]:
        """Those of `ids` no scope of the group serves (a mall found gone: all of them); the
        others rewritten."""
        mall = scopes[0].mall_id
        verdict = await self.ask(scopes[0].rtype, {mall: ids}, within=scopes)
        if mall is not None and mall in verdict.malls_gone:
            return list(ids)
        return [i for i in ids if i in verdict.gone]

    async def confirm_and_delete(self, scopes: Sequence[Scope], ids: Sequence[int]) -> int:
        """Delete those of `ids` that `filter[id]` confirms are gone; rewrite the others.
        A confirmation is an inference, not the feed's dated evidence: no tombstone, so a row
        created again under the same id, or served again, is written whatever its stamp."""
        gone = await self.confirm_gone(scopes, ids)
        if not gone:
            return 0
        return self.mirror.table(scopes[0].rtype.name).delete(gone)

    async def leave_malls(self, rtype: ResourceType, ids: Sequence[int]) -> int:
        """Ask `filter[id]` for mall-scoped `ids` in each mall the mirror lists them in; a mall
        that no longer serves one loses the membership (the row stays: only evidence that no
        mall lists it deletes it). Returns the memberships removed."""
        left = 0
        for mall, mall_ids in self.mirror.table(rtype.name).by_mall(ids).items():
            left += await self.leave_mall(rtype, mall, mall_ids)
        return left

    async def leave_mall(self, rtype: ResourceType, mall: int, ids: Sequence[int]) -> int:
        """`leave_malls` in one mall: those of `ids` it no longer serves lose the membership.
        Returns the memberships removed."""
        gone = await self.confirm_gone(scopes_of(rtype, [mall]), ids)
        return self.mirror.table(rtype.name).remove_memberships(mall, gone)
