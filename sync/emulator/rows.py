"""The rows the emulator holds and their indexes: `Rows`, read by every listing and encoding.

Rows by type and id (`by_type`), ids in order per type (`order`) and per mall (`by_mall`), the
inverse-linkage index (`owners`: who names a row), the extra malls of rows the hard readings
give more than one (`memberships`, kept by `sync.emulator.memberships`), a version per type that
every change bumps (the query caches and ETags key on it), and the previous copy of each changed
row (what a lagging replica would still serve). Reads that need only these live here: a
relationship's linkage, a mall's deals by the national/local rule, the ids a route lists.

Nothing here makes or changes a row's content; `Dataset` (`sync.emulator.dataset`) does, through
the index operations below, so the indexes and the rows never disagree.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sync.emulator.encodings import Encodings, Templates
from sync.emulator.hard import Hard
from sync.emulator.records import Owners, Rec, next_revision
from sync.emulator.spec import INVERSE, MALL_MEMBERS, TARGET, TYPES

#: Previous copies kept for the lagging-replica fault.
PREVIOUS_LIMIT = 20_000
#: Malls whose deal lists (`Rows.mall_deals`) are kept between requests.
MALL_DEALS_KEPT = 64


class Rows:
    """All resources by type, with ordered id indexes and the inverse-linkage index."""

    def __init__(self, seed: int, hard: Hard) -> None:
        self.seed = seed
        self.by_type: dict[str, dict[int, Rec]] = {t: {} for t in [*TYPES, "malls", "deletions"]}
        self.order: dict[str, list[int]] = {t: [] for t in self.by_type}
        self.by_mall: dict[tuple[str, int], list[int]] = {}
        # (type, id) -> the (type, id) of every resource whose links name it (inverse linkage).
        self.owners = Owners()
        # `mall_deals`: national deals and local deals by mall, per generation; a few malls'
        # merged lists (a national deal is in every mall's list: one list per mall at 1M
        # resources and 1,000 malls would hold ~45 M ids).
        self._deal_parts: tuple[int, list[int], dict[int, list[int]]] | None = None
        self._mall_deals: OrderedDict[int, tuple[int, list[int]]] = OrderedDict()
        # Encoded variants other than the plain one, bounded (`encodings.Encodings`).
        self.encodings = Encodings()
        self.templates = Templates()
        self.version: dict[str, int] = dict.fromkeys(self.by_type, 0)
        self.next_id: dict[str, int] = dict.fromkeys(self.by_type, 1)
        # The copy each changed resource had before its last change: what a lagging replica
        # upstream would still serve (`Faults.stale_rate`). Bounded; oldest dropped first.
        self.previous: dict[tuple[str, int], Rec] = {}
        # The hard readings (`sync.emulator.hard`), shared with the app. What they need held
        # is held only while they are on: the malls of rows with more than `Rec.mall`
        # (`memberships`), the deleted ids per type (`Dataset.freed`).
        self.hard = hard
        self.memberships: dict[tuple[str, int], tuple[int, ...]] = {}
        # Which switches' memberships are built, as of which count of assignments
        # (`sync.emulator.memberships.catch_up`).
        self.built = {"multi_mall": False, "route_memberships": False}
        self.switches_seen = -1

    # -- indexes -------------------------------------------------------------------------------

    def index(self, rec: Rec) -> None:
        """Record `rec` as an owner of every resource its links name (the inverse index)."""
        self._each_named(rec, self.owners.add)

    def unindex(self, rec: Rec) -> None:
        self._each_named(rec, self.owners.discard)

    @staticmethod
    def _each_named(rec: Rec, apply: Callable[[tuple[str, int], tuple[str, int]], None]) -> None:
        """`apply(target, owner)` for every resource `rec`'s owned links name. A plain loop, not
        a generator: it runs for every row the generator adds (a tenth of a start-up's time)."""
        owner = (rec.type, rec.id)
        for name, value in rec.link_items():
            target = TARGET.get(name, name)
            for i in value if isinstance(value, tuple) else () if value is None else (value,):
                apply((target, i), owner)

    def add(self, rec: Rec) -> None:
        self.by_type[rec.type][rec.id] = rec
        insort(self.order[rec.type], rec.id)
        if rec.mall is not None:
            insort(self.by_mall.setdefault((rec.type, rec.mall), []), rec.id)
        self.index(rec)
        self.version[rec.type] += 1

    def remove(self, rec: Rec) -> None:
        """Take `rec` out of every index, the listings of all its malls included."""
        del self.by_type[rec.type][rec.id]
        lst = self.order[rec.type]
        del lst[bisect_left(lst, rec.id)]
        held = self.memberships.pop((rec.type, rec.id), None) if self.memberships else None
        for mall in held if held is not None else () if rec.mall is None else (rec.mall,):
            listed = self.by_mall[(rec.type, mall)]
            del listed[bisect_left(listed, rec.id)]
        self.unindex(rec)
        self.version[rec.type] += 1

    def revise(self, rec: Rec) -> None:
        """A new revision of `rec`: its cached encodings are never served again."""
        rec.rev = next_revision()

    def set_attrs(self, rec: Rec, attrs: dict[str, Any]) -> None:
        """Merge `attrs` into `rec`'s attributes (no stamp, version or notice: see `touch`)."""
        merged = rec.decoded()
        merged.update(attrs)
        rec.set_attrs(merged)
        self.revise(rec)

    def set_links(self, rec: Rec, links: dict[str, Any]) -> None:
        """Replace some of `rec`'s owned linkage, keeping the inverse index in step."""
        self.unindex(rec)
        rec.set_links(links)
        self.index(rec)
        self.revise(rec)

    def remember(self, rec: Rec) -> None:
        """Keep `rec`'s current copy as its previous one (before a change)."""
        self.previous.pop((rec.type, rec.id), None)
        self.previous[(rec.type, rec.id)] = rec.copy()  # shares the immutable blob and links
        if len(self.previous) > PREVIOUS_LIMIT:
            del self.previous[next(iter(self.previous))]

    def older(self, rec: Rec) -> Rec:
        """The copy of `rec` before its last change (itself when none is kept)."""
        return self.previous.get((rec.type, rec.id), rec)

    # -- reads ---------------------------------------------------------------------------------

    def inverse(self, type_name: str, rid: int, owner_type: str) -> list[int]:
        """Ids of the `owner_type` resources whose links name (`type_name`, `rid`)."""
        return self.owners.of_type((type_name, rid), owner_type)

    def linkage(self, rec: Rec, name: str) -> list[int] | int | None:
        """The ids `rec`'s relationship `name` holds now: owned, inverse or mall members."""
        if rec.type == "malls" and name in MALL_MEMBERS:
            return list(self.ids(name, rec.id))
        inverse = INVERSE.get((rec.type, name))
        if inverse is not None:
            return self.inverse(rec.type, rec.id, inverse[0])
        value = rec.link(name)
        return (
            list(value) if isinstance(value, tuple) else value if isinstance(value, int) else None
        )

    def _deals_by_scope(self) -> tuple[list[int], dict[int, list[int]]]:
        """This generation's national deals, and local deals by the malls of their stores."""
        parts = self._deal_parts
        if parts is not None and parts[0] == self.generation:
            return parts[1], parts[2]
        stores = self.by_type["stores"]
        deals = self.by_type["deals"]
        national: list[int] = []
        local: dict[int, list[int]] = {}
        for did in self.order["deals"]:
            deal = deals[did]
            if not deal.get("is_local"):
                national.append(did)
                continue
            malls = {s.mall for sid in deal.link("stores") or () if (s := stores.get(sid))}
            if self.memberships:  # `Hard.multi_mall`: a store's other malls list its deals too
                held = self.memberships
                malls.update(
                    m for sid in deal.link("stores") or () for m in held.get(("stores", sid), ())
                )
            for mall in malls:
                if mall is not None:
                    local.setdefault(mall, []).append(did)
        self._deal_parts = (self.generation, national, local)
        return national, local

    def mall_deals(self, mall: int) -> list[int]:
        """`GET /malls/{id}/deals`: the mall's local deals (a store of the deal is in the mall)
        and, unless the mall sets `exclude_national_deals`, every national deal (`is_local`
        false). A few malls' lists are kept per data generation."""
        cached = self._mall_deals.get(mall)
        if cached is not None and cached[0] == self.generation:
            self._mall_deals.move_to_end(mall)
            return cached[1]
        national, local = self._deals_by_scope()
        rec = self.by_type["malls"].get(mall)
        own = local.get(mall, [])
        out = sorted(national + own) if rec and not rec.get("exclude_national_deals") else own
        self._mall_deals[mall] = (self.generation, out)
        self._mall_deals.move_to_end(mall)
        while len(self._mall_deals) > MALL_DEALS_KEPT:
            self._mall_deals.popitem(last=False)
        return out

    @property
    def generation(self) -> int:
        """A number that changes whenever any type's version does (versions only grow)."""
        return sum(self.version.values())

    def ids(self, type_name: str, mall: int | None = None) -> list[int]:
        """Ids in order (a shared list: do not mutate)."""
        if mall is None:
            return self.order[type_name]
        if type_name == "deals" and not self.hard.route_memberships:
            return self.mall_deals(mall)
        return self.by_mall.get((type_name, mall), [])
