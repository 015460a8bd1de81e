"""Mall members many malls a request: `GET /malls?include=<types>` in place of per-mall listings.

Five types (stores, products, programs, social feeds, press releases) have no collection route of
their own: they are listed per mall (`/malls/{id}/stores`). Polled by listing, they cost one
request per mall and type each cycle (5,000 at 1,000 malls), and a webhook notice about a row the
mirror does not hold yet (a creation) names no mall to fetch it in. The spec lists these types as
relationships of a mall and says valid include names are "not shown", so this module finds out
at run time whether the upstream serves them:

- `detect()` asks page 1 of `/malls` with every such type included and sparse fieldsets (the
  malls' linkage, the members' `updated_at`), and decides per type. The fast path is taken when
  the upstream serves the linkage, an `updated_at` for every member, and the linkage agrees with
  the mirror (at most 10 % of the mirror's rows of those malls missing from it: a linkage that
  is capped or lists only some rows shows here). Otherwise, or on a 4xx, that type is listed per
  mall. The decision and its reason are kept in the mirror (`ccsync status`, `/metrics`), and the
  daemon detects again before every reconcile, so an upstream that starts or stops serving them
  is followed.
- `poll()` walks the `/malls` pages (`[upstream] members_page_size` malls a request, conditional:
  an unchanged page answers 304 with no body) and fetches by `filter[id]`, in the mall whose
  linkage names it, every member the mirror lacks or holds with an older `updated_at`. A page's
  ETag is kept only after its fetches are written, so a 304 never hides an unapplied change.
  Members the mirror holds but the linkage no longer names are left to the deletions feed and the
  reconcile, exactly as with per-mall listings.
- `locate()` finds the malls of unknown ids (creations announced by webhooks). On the fast path
  it walks the pages of recently active malls first and stops once every id is found (each page
  is handled as a poll would, so its ETag stays sound); per mall, it tries `filter[id]` in the
  recently active malls and leaves what it did not find to the caller (a poll of every mall).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from sync.channel.pages import Page
from sync.channel.paging import PAST_END
from sync.core.errors import BadResponseError, UpstreamError
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope
from sync.model.stamps import iso_ms, normalize_or_none
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore

Mode = Literal["include", "per_mall"]
INCLUDE: Mode = "include"
PER_MALL: Mode = "per_mall"
#: Where the decision is kept in the mirror (`_sync_meta`), for `ccsync status`.
META_KEY = "mall_members"
#: Share of the mirror's rows of the probed malls that may be missing from the linkage (rows
#: deleted upstream since the last reconcile) before the linkage is judged partial.
MISSING_SHARE = 0.1
#: Malls remembered as recently active (`touch`), and how many `locate` tries per mall.
HOT_MALLS = 64
HOT_TRIES = 3
#: The most malls a creation is looked for in by `filter[id]` on the per-mall path (the hot
#: ones first, then those whose rows of the type changed last); what is not found there is
#: the next scheduled poll's (#47: a creation costs at most this many requests, not one per
#: mall).
LOCATE_MALLS = 10
#: (type, id) fetched in the mall that named it and not served there (a program no longer
#: current, say): not fetched again until its `updated_at` changes. Bounded.
TRIED_KEPT = 50_000


@dataclass(frozen=True)
class Decision:
    """How one mall-scoped type is polled, and why."""

    mode: Mode
    reason: str


def refused(exc: UpstreamError) -> bool:
    """Whether `exc` means the fast path is not to be had: a 4xx other than 401 and 429, or
    an off-spec answer (a linkage id that is not a number, a page that is not a collection),
    as opposed to a transient failure that must not change any decision. Either way the
    mall-scoped types go back to per-mall listings, the path every upstream serves."""
    if isinstance(exc, BadResponseError):
        return True
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in (401, 429)


def _linkage(mall: dict[str, Any], rel: str) -> list[int] | None:
    """The ids a mall's relationship `rel` names, or None when its linkage is not served."""
    rels = mall.get("relationships")
    entry = rels.get(rel) if isinstance(rels, dict) else None
    data = entry.get("data") if isinstance(entry, dict) else None
    if not isinstance(data, list):
        return None
    return [parse_id(d.get("id")) for d in data if isinstance(d, dict)]


def _stamps(page: Page) -> dict[tuple[str, int], str | None]:
    """(type, id) -> normalised `updated_at` of the page's included members."""
    out: dict[tuple[str, int], str | None] = {}
    for item in page.included:
        name = catalogue.normalize_type(str(item.get("type", "")))
        if name is None:
            continue
        attrs = item.get("attributes") or {}
        out[(name, parse_id(item.get("id")))] = normalize_or_none(attrs.get("updated_at"))
    return out


class Members(Protocol):
    """What `MallIncludes` asks of the upstream client (`ChannelClient`, or a test's fake):
    `GET /malls` carrying its malls' members, conditional on an ETag."""

    async def list_members(
        self, rels: Sequence[str], number: int, *, size: int, etag: str | None = None
    ) -> tuple[Page, str | None]: ...


class MallIncludes:
    """The mall-scoped types' fast path and its fallback; see the module docstring."""

    def __init__(
        self,
        client: Members,
        mirror: MirrorStore,
        evidence: Evidence,
        types: Sequence[ResourceType],
        malls: Callable[[], list[int]],
        *,
        page_size: int = 100,
        enabled: bool = True,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.evidence = evidence
        self.types = [t for t in types if t.level == "mall"]
        self.malls = malls
        self.page_size = page_size
        self.enabled = enabled
        self.decisions: dict[str, Decision] = {
            t.name: Decision(PER_MALL, "not detected yet") for t in self.types
        }
        self._etags: dict[tuple[tuple[str, ...], int], tuple[str, int]] = {}
        self._tried: OrderedDict[tuple[str, int], str | None] = OrderedDict()
        self.hot: OrderedDict[int, None] = OrderedDict()
        self.log = get_logger("sync.members")

    # -- the decision ----------------------------------------------------------------------------

    def fast(self) -> list[ResourceType]:
        """The types polled and located through `/malls?include=`."""
        return [t for t in self.types if self.decisions[t.name].mode == INCLUDE]

    def mode(self, rtype: ResourceType) -> Mode:
        decision = self.decisions.get(rtype.name)
        return decision.mode if decision is not None else PER_MALL

    def pages(self) -> int:
        """`/malls` pages one walk takes (for the poll cycle's cost)."""
        return max(1, math.ceil(len(self.malls()) / self.page_size))

    async def detect(self) -> dict[str, Decision]:
        """Probe the fast path (see the module docstring); keep and return the decisions."""
        if not self.types:
            return {}
        if not self.enabled:
            off = Decision(PER_MALL, 'off in config ([upstream] mall_includes = "off")')
            return self._decide(dict.fromkeys((t.name for t in self.types), off))
        names = [t.name for t in self.types]
        page, _ = await self._probe(names)
        decisions: dict[str, Decision] = {}
        if page is None:
            # Refused together: one type the upstream does not serve spoils the request, so
            # ask for each alone (one request each, at start and before each reconcile).
            for name in names:
                alone, why = await self._probe([name])
                decisions[name] = (
                    self._judge(alone, name) if alone is not None else Decision(PER_MALL, why)
                )
        else:
            decisions = {name: self._judge(page, name) for name in names}
        return self._decide(decisions)

    async def _probe(self, rels: list[str]) -> tuple[Page | None, str]:
        """Page 1 of `/malls` with `rels` included, or None and why (a 4xx: not served). A
        5xx or a network failure propagates: nothing is decided on a transient error."""
        try:
            page, _ = await self.client.list_members(rels, 1, size=self.page_size)
        except UpstreamError as exc:
            if not refused(exc):
                raise
            return None, f"GET /malls?include={','.join(rels)} answered {exc.status}"
        return page, ""

    def _judge(self, page: Page, name: str) -> Decision:
        """Whether `page` serves `name`'s linkage and stamps, agreeing with the mirror."""
        stamps = _stamps(page)
        missing = held = 0
        for mall in page.resources:
            linked = _linkage(mall, name)
            if linked is None:
                return Decision(PER_MALL, f"GET /malls?include={name} serves no linkage")
            if any((name, i) not in stamps for i in linked):
                return Decision(
                    PER_MALL, f"GET /malls?include={name} leaves members out of `included`"
                )
            local = set(self.mirror.table(name).ids(mall_id=parse_id(mall.get("id"))))
            held += len(local)
            missing += len(local - set(linked))
        if held and missing > MISSING_SHARE * held:
            return Decision(
                PER_MALL,
                f"the malls' {name} linkage lacks {missing:,} of the {held:,} rows the mirror "
                "holds in those malls (a capped or partial list)",
            )
        return Decision(INCLUDE, f"GET /malls?include={name}, {self.page_size} malls a request")

    def _decide(self, decisions: dict[str, Decision]) -> dict[str, Decision]:
        changed = {n: d for n, d in decisions.items() if self.decisions.get(n) != d}
        self.decisions.update(decisions)
        record = {n: {"mode": d.mode, "reason": d.reason} for n, d in self.decisions.items()}
        self.mirror.meta.set(
            META_KEY, orjson.dumps({"types": record, "detected_at": iso_ms(time.time())}).decode()
        )
        for name, d in changed.items():
            self.log.info("members.mode", type=name, mode=d.mode, reason=d.reason)
        return dict(self.decisions)

    def fall_back(self, reason: str) -> None:
        """The fast path failed mid-walk with a 4xx: list per mall until the next detection."""
        self._decide({t.name: Decision(PER_MALL, reason) for t in self.fast()})

    # -- walks ---------------------------------------------------------------------------------

    def touch(self, mall_id: int) -> None:
        """Note recent activity in `mall_id` (a notice, a creation): `locate` looks there first."""
        self.hot[mall_id] = None
        self.hot.move_to_end(mall_id)
        while len(self.hot) > HOT_MALLS:
            self.hot.popitem(last=False)

    async def poll(self) -> dict[str, int]:
        """Fetch every member changed since the mirror last saw it; rows written per type."""
        fast = tuple(t.name for t in self.fast())
        if not fast:
            return {}
        written = dict.fromkeys(fast, 0)
        await self._walk(fast, range(1, self.pages() + 1), written, until=None)
        return written

    async def locate(self, rtype: ResourceType, ids: Iterable[int]) -> set[int]:
        """Find and fetch `ids` (rows the mirror lacks); returns those found in some mall."""
        wanted = set(ids)
        if not wanted:
            return set()
        if self.mode(rtype) == INCLUDE:
            written = {rtype.name: 0}
            seen = await self._walk((rtype.name,), self._hot_pages(), written, until=wanted)
            return wanted & seen
        found: set[int] = set()
        hot = list(reversed(self.hot))[:HOT_TRIES]
        busy = self.mirror.table(rtype.name).busiest_malls(LOCATE_MALLS)
        known = set(self.malls())
        order = [m for m in dict.fromkeys([*hot, *busy]) if not known or m in known]
        for mall in order[:LOCATE_MALLS]:
            rest = sorted(wanted - found)
            if not rest:
                break
            got = await self._fetch(rtype, mall, rest)
            if got:
                found |= got
                self.touch(mall)
        return found

    def _hot_pages(self) -> list[int]:
        """Every page number, those holding recently active malls first."""
        malls = sorted(self.malls())
        first = [bisect_left(malls, m) // self.page_size + 1 for m in reversed(self.hot)]
        return list(dict.fromkeys([*first, *range(1, self.pages() + 1)]))

    async def _walk(
        self,
        rels: tuple[str, ...],
        numbers: Iterable[int],
        written: dict[str, int],
        *,
        until: set[int] | None,
    ) -> set[int]:
        """Ask each page of `numbers` (and pages past them that `links.last` reveals); fetch
        its changed members. Stops once every id of `until` was named by some linkage; returns
        the ids of `until` seen."""
        seen: set[int] = set()
        queue = list(numbers)
        asked: set[int] = set()
        last_known = max(queue, default=0)
        while queue:
            number = queue.pop(0)
            if number in asked:
                continue
            asked.add(number)
            key = (rels, number)
            kept = self._etags.get(key)
            try:
                page, etag = await self.client.list_members(
                    rels, number, size=self.page_size, etag=kept[0] if kept else None
                )
            except UpstreamError as exc:
                if number == 1 or exc.status not in PAST_END:
                    raise
                # Past the end (fewer malls upstream than the mirror holds: a mall deleted)
                # when page 1's `links.last` says so; a page it promises failed.
                first, _ = await self.client.list_members(rels, 1, size=self.page_size)
                if first.last >= number:
                    raise
                continue
            if page.not_modified:
                continue  # as it was when every change it named was written
            if page.last > last_known:  # malls added since the mirror last listed them
                queue += range(last_known + 1, page.last + 1)
                last_known = page.last
            if until is not None:
                for mall in page.resources:
                    for name in rels:
                        seen |= until & set(_linkage(mall, name) or ())
            await self._apply(page, rels, written)
            if etag:
                self._etags[key] = (etag, page.last)
            if until is not None and until <= seen:
                break
        return seen

    async def _apply(self, page: Page, rels: tuple[str, ...], written: dict[str, int]) -> None:
        """Fetch, mall by mall, the members the mirror lacks or holds older."""
        stamps = _stamps(page)
        for name in rels:
            rtype = catalogue.TYPES[name]
            by_mall: dict[int, list[int]] = {}
            for mall in page.resources:
                for rid in _linkage(mall, name) or ():
                    by_mall.setdefault(parse_id(mall.get("id")), []).append(rid)
            held = self.mirror.table(name).stamps([i for ids in by_mall.values() for i in ids])
            for mall_id, ids in by_mall.items():
                stale = []
                for rid in ids:
                    upstream = stamps.get((name, rid))
                    if rid not in held:
                        if (name, rid) in self._tried and self._tried[(name, rid)] == upstream:
                            continue
                        stale.append(rid)
                    elif upstream is not None and (
                        (local := held[rid]) is None or upstream > local
                    ):
                        stale.append(rid)
                if stale:
                    got = await self._fetch(rtype, mall_id, stale)
                    written[name] = written.get(name, 0) + len(got)
                    for rid in stale:
                        if rid not in got and rid not in held:
                            self._remember_tried(name, rid, stamps.get((name, rid)))
                    if got:
                        self.touch(mall_id)

    def _remember_tried(self, name: str, rid: int, stamp: str | None) -> None:
        self._tried[(name, rid)] = stamp
        self._tried.move_to_end((name, rid))
        while len(self._tried) > TRIED_KEPT:
            self._tried.popitem(last=False)

    async def _fetch(self, rtype: ResourceType, mall_id: int, ids: Sequence[int]) -> set[int]:
        """Fetch `ids` by `filter[id]` in one mall (`Evidence.ask`: a listing's 404 is asked of
        the mall; gone, the deletions feed takes its rows); the ids it served and the mirror
        holds."""
        scopes = [Scope(rtype, mall_id, p) for p in rtype.scope_params]
        return (await self.evidence.ask(rtype, {mall_id: ids}, within=scopes)).served


def recorded(mirror: MirrorStore) -> dict[str, Any] | None:
    """The decisions the daemon last recorded (`ccsync status`), or None before any."""
    raw = mirror.meta.get(META_KEY)
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
