"""Which malls a row belongs to when the hard readings make it more than its one `Rec.mall`.

By default a mall-scoped row has one mall (`Rec.mall`) and a mall's deals follow the
national/local rule (`Rows.mall_deals`). Two hard readings (`sync.emulator.hard`) change
that: `multi_mall` gives about a third of the rows of `MULTI_MALL_TYPES` one or two more malls,
and `route_memberships` gives every deal an explicit set of malls. Both live in
`Rows.memberships`, (type, id) -> the sorted malls of a row that has more (or other) malls
than its `Rec.mall`; `Rows.by_mall` lists the row under each (and `Rows.remove` takes a removed
row out of every one). A row absent from it has
`Rec.mall` alone, so with both switches off nothing here runs and nothing is held.

A mall-scoped row's `Rec.mall` is always its first (lowest) mall, which a store's `mall`
relationship names; a deal's `Rec.mall` stays None. The functions here work on the rows and
their indexes (`sync.emulator.rows`) alone: a change's stamp, notice and versions are the
caller's (`Dataset.move`).
"""

from __future__ import annotations

import random
from bisect import bisect_left, insort

from sync.emulator.records import Rec
from sync.emulator.rows import Rows

#: The types whose rows may belong to several malls under `multi_mall`: the members listed
#: only under malls, and contacts.
MULTI_MALL_TYPES = ("contacts", "press_releases", "products", "programs", "social_feeds", "stores")
#: The mall-scoped types `mutate_randomly` moves under `silent_moves` (a job listing's mall is its
#: store's, so it is not moved on its own).
MOVABLE = (
    "contacts",
    "events",
    "ifeatures",
    "mall_messages",
    "press_releases",
    "products",
    "programs",
    "social_feeds",
    "stores",
)


def malls_of(data: Rows, type_name: str, rid: int) -> list[int]:
    """The sorted ids of the malls whose routes list `rid` (a deal: whatever visibility)."""
    rec = data.by_type[type_name][rid]
    held = data.memberships.get((type_name, rid))
    if held is not None:
        return list(held)
    if type_name == "deals":
        return [] if data.hard.route_memberships else _deal_rule(data, rec)
    return [] if rec.mall is None else [rec.mall]


def _deal_rule(data: Rows, deal: Rec) -> list[int]:
    """The malls `Rows.mall_deals` lists `deal` in: its stores' malls when local, every mall
    not excluding national deals when national."""
    malls = data.by_type["malls"]
    if not deal.get("is_local"):
        return [m for m in data.order["malls"] if not malls[m].get("exclude_national_deals")]
    stores = data.by_type["stores"]
    found = {
        m for sid in deal.link("stores") or () if (s := stores.get(sid)) for m in _all(data, s)
    }
    return sorted(found)


def _all(data: Rows, rec: Rec) -> tuple[int, ...]:
    held = data.memberships.get((rec.type, rec.id))
    return held if held is not None else () if rec.mall is None else (rec.mall,)


def set_malls(data: Rows, rec: Rec, malls: list[int]) -> None:
    """Make `malls` the malls of `rec` (indexes, `Rec.mall`, a store's `mall` linkage), with no
    stamp, notice or version: the callers decide what the change is."""
    key = (rec.type, rec.id)
    old = set(_all(data, rec))
    new = sorted(set(malls))
    if rec.type != "deals" and not new:
        raise ValueError(f"{rec.type} {rec.id} would belong to no mall")
    for mall in old - set(new):
        listed = data.by_mall[(rec.type, mall)]
        del listed[bisect_left(listed, rec.id)]
    for mall in set(new) - old:
        insort(data.by_mall.setdefault((rec.type, mall), []), rec.id)
    if rec.type == "deals":
        data.memberships[key] = tuple(new)
        return
    if len(new) > 1:
        data.memberships[key] = tuple(new)
    else:
        data.memberships.pop(key, None)
    if rec.mall != new[0]:
        rec.mall = new[0]
        if rec.link("mall") is not None:
            data.set_links(rec, {"mall": new[0]})


def move(data: Rows, rec: Rec, from_mall: int, to_mall: int) -> None:
    """`rec` leaves `from_mall` and joins `to_mall` (if not in it already)."""
    if rec.type == "deals" and not data.hard.route_memberships:
        raise ValueError("a deal's malls follow the national/local rule (see route_memberships)")
    if rec.type != "deals" and rec.mall is None:
        raise ValueError(f"{rec.type} are not mall-scoped")
    current = malls_of(data, rec.type, rec.id)
    if from_mall not in current:
        raise ValueError(f"{rec.type} {rec.id} is not in mall {from_mall}")
    if to_mall not in data.by_type["malls"]:
        raise ValueError(f"no mall {to_mall}")
    if to_mall == from_mall:
        raise ValueError("a move needs two malls")
    set_malls(data, rec, [m for m in current if m != from_mall] + [to_mall])


def leave(data: Rows, rec: Rec, mall: int) -> None:
    """`rec` is no longer in `mall` (which is not its only one, unless it is a deal)."""
    set_malls(data, rec, [m for m in _all(data, rec) if m != mall])


def build_multi_mall(data: Rows) -> None:
    """About a third of the rows of `MULTI_MALL_TYPES` join one or two more malls (seeded by
    the data set's seed, apart from its own generator, so the rows themselves are unchanged)."""
    rng = random.Random(f"{data.seed}:multi_mall")
    malls = data.order["malls"]
    if len(malls) < 2:
        return
    for type_name in MULTI_MALL_TYPES:
        recs = data.by_type[type_name]
        for rid in data.order[type_name]:
            if rng.random() >= 1 / 3:
                continue
            rec = recs[rid]
            if rec.mall is None:
                continue
            extra = [m for m in rng.sample(malls, min(3, len(malls))) if m != rec.mall]
            set_malls(data, rec, [rec.mall, *extra[: rng.randint(1, 2)]])


def drop_multi_mall(data: Rows) -> None:
    """Every multi-mall row keeps its first mall only."""
    for (type_name, rid), malls in list(data.memberships.items()):
        if type_name != "deals":
            set_malls(data, data.by_type[type_name][rid], [malls[0]])


def give_deal_malls(data: Rows, rec: Rec, rng: random.Random, most: int) -> None:
    """`rec` (a deal) gets 1 to `most` random malls."""
    malls = data.order["malls"]
    k = min(rng.randint(1, most), len(malls))
    set_malls(data, rec, rng.sample(malls, k) if k else [])


def build_deal_malls(data: Rows) -> None:
    """Every deal gets an explicit set of 1-3 malls (`route_memberships`)."""
    rng = random.Random(f"{data.seed}:route_memberships")
    recs = data.by_type["deals"]
    for rid in data.order["deals"]:
        give_deal_malls(data, recs[rid], rng, 3)


def drop_deal_malls(data: Rows) -> None:
    """Deals go back to the national/local rule."""
    for key in [k for k in data.memberships if k[0] == "deals"]:
        set_malls(data, data.by_type["deals"][key[1]], [])
        del data.memberships[key]


def catch_up(data: Rows) -> None:
    """Catch up with switches assigned since the last call: build or drop the memberships of
    `multi_mall` and `route_memberships`; every type's version moves, so nothing selected or
    cached under the other setting is served again."""
    hard = data.hard
    if hard.changes == data.switches_seen:
        return
    data.switches_seen = hard.changes
    for name, build, drop in (
        ("multi_mall", build_multi_mall, drop_multi_mall),
        ("route_memberships", build_deal_malls, drop_deal_malls),
    ):
        on = bool(getattr(hard, name))
        if on != data.built[name]:
            data.built[name] = on
            (build if on else drop)(data)
    for type_name in data.version:
        data.version[type_name] += 1
