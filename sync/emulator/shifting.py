"""Rows that leave a listing while a client walks it (`Hard.shifting_listings`).

Paging by number is not a snapshot: a row of an earlier page that leaves the listing moves
every later row one place earlier, so a client reading page after page skips one. Every
`EVERY`th request for a page number >= 2 of a collection (top level or mall route, whatever the
filter; the deletions feed excepted, whose entries never leave), one row of the earlier pages,
picked by the data set's seeded `hard_rng`, leaves that listing by the honest change that makes
it leave: a deal made Private (a real update) when the listing leaves Private deals out; on a
mall route, a mall-scoped row moved silently to another mall; a row updated so that it no longer
matches the listing's boolean or `updated_at` upper-bound filter; else it is deleted (feed entry
and notice). `Dataset.shifted` counts them.
"""

from __future__ import annotations

from sync.emulator.dataset import Dataset
from sync.emulator.memberships import MOVABLE
from sync.emulator.query import Query, Selector, comparable
from sync.model.stamps import iso_ms

EVERY = 3


def before_page(
    data: Dataset, selector: Selector, type_name: str, mall: int | None, q: Query
) -> str | None:
    """Count a request for page `q.number` of a listing and, when its turn comes, make one row
    of the earlier pages leave; returns how it left (None: nothing left)."""
    if q.number < 2 or type_name == "deletions":
        return None
    data.shift_asks += 1
    if data.shift_asks % EVERY:
        return None
    earlier = selector.select(type_name, mall, q)[: (q.number - 1) * q.size]
    if not earlier:
        return None
    how = leave(data, type_name, data.hard_rng.choice(earlier), mall, q)
    data.shifted += 1
    return how


def leave(data: Dataset, type_name: str, rid: int, mall: int | None, q: Query) -> str:
    """Make row `rid` leave the listing `q` of `type_name` (under `mall`); returns how."""
    equals = dict(q.equals)
    visibility = equals.get("visibility")
    if type_name == "deals" and visibility is not None and "Private" not in visibility:
        data.update(type_name, rid, {"visibility": "Private"})
        return "private"
    movable = type_name in MOVABLE or (type_name == "deals" and data.hard.route_memberships)
    if mall is not None and movable:
        current = data.malls_of(type_name, rid)
        others = [m for m in data.order["malls"] if m not in current]
        if mall in current and others:
            data.move(type_name, rid, mall, data.hard_rng.choice(others))
            return "move"
    rec = data.by_type[type_name][rid]
    for attr, accepted in q.equals:
        value = rec.get(attr)
        if isinstance(value, bool) and str(not value).lower() not in accepted:
            data.update(type_name, rid, {attr: not value})
            return "update"
    now = comparable(iso_ms(data.now()))
    if any(f == "updated_at" and op in ("lt", "lte") and v < now for f, op, v in q.dates):
        data.update(type_name, rid)  # its new stamp is past the bound
        return "update"
    data.delete(type_name, rid)
    return "delete"
