"""What a running emulator does between requests: random changes, as an upstream's editors make.

`mutate_randomly(data, n, seed)` applies `n` changes drawn from its own seeded generator (so a run
can be replayed): mostly updates, some creates and deletes, and, as the hard readings and
switches ask, silent updates (`Dataset.silent_rate`), silent moves between malls
(`Hard.silent_moves`), deletions of sideloaded rows (`Hard.sideload_deletions`), ids deleted
and created again at once (`Hard.recreate_before_feed`), rows a "current" list drops for a
while (`Hard.current_lists_drop`), updates that commit late (`Hard.late_commits`) and bulk
updates of a run under one stamp (`Hard.unstable_ties`, `Hard.micro_stamps`) and bulk
deletes whose feed entries share one stamp (`Hard.micro_stamps`). `ccsync
emulator --mutations-per-second` and the benchmarks drive it; every change goes through the
data set's mutation API, so stamps, notices and the deletions feed follow as for any other.
"""

from __future__ import annotations

import random

from sync.emulator.commits import BULK_MIN, BULK_ROWS, BULK_SHARE, LATE_LAGS, LATE_SHARE
from sync.emulator.dataset import Dataset
from sync.emulator.memberships import MOVABLE
from sync.emulator.spec import SIDELOADED, TYPES

#: Share of `mutate_randomly`'s operations that `Hard.sideload_deletions` makes deletions of
#: images, tags or groups, and of its updates that `Hard.silent_moves` makes moves.
HARD_SHARE = 0.1
#: Share of its deletions that `Hard.recreate_before_feed` makes a deletion and a creation.
RECREATE_SHARE = 0.3
#: How long `Hard.current_lists_drop` drops a row of a "current" list, in seconds.
DROP_SECONDS = (2.0, 10.0)


def mutate_randomly(data: Dataset, n: int, rng_seed: int) -> list[tuple[str, str, str]]:
    """Apply `n` random changes drawn from `rng_seed`; returns (operation, type, id) of each."""
    rng = random.Random(rng_seed)
    done: list[tuple[str, str, str]] = []
    types = [t for t in TYPES if t not in SIDELOADED]
    hard = data.hard
    for _ in range(n):
        if hard.sideload_deletions and rng.random() < HARD_SHARE:
            side = rng.choice(SIDELOADED)
            if len(data.order[side]) >= 3:
                rid = rng.choice(data.order[side])
                data.delete(side, rid)
                done.append(("delete", side, str(rid)))
                continue
        t = rng.choice(types)
        op = rng.choices(("update", "create", "delete"), weights=(60, 25, 15))[0]
        ids = data.order[t]
        if hard.micro_stamps and rng.random() < BULK_SHARE / 2 and len(ids) >= 2 * BULK_MIN:
            rows = BULK_ROWS // 3
            start = rng.randrange(len(ids) - rows + 1)
            chosen = list(ids[start : start + rows])  # `ids` is the type's live order: it shrinks
            data.bulk_delete(t, chosen)
            done.append(("bulk_delete", t, str(chosen[0])))
            continue
        bulky = hard.unstable_ties or hard.micro_stamps
        if bulky and rng.random() < BULK_SHARE and len(ids) >= BULK_MIN:
            rows = min(BULK_ROWS, len(ids))
            start = rng.randrange(len(ids) - rows + 1)
            if data.bulk_update(t, list(ids[start : start + rows])) is not None:
                done.append(("bulk", t, str(ids[start])))
                continue
        if op == "create" or len(ids) < 3:
            done.append(("create", t, str(data.create(t).id)))
        elif op == "update" and hard.current_lists_drop and rng.random() < HARD_SHARE:
            dropped = drop_current(data, rng)
            if dropped is not None:
                done.append(("drop", dropped[0], str(dropped[1])))
        elif op == "update" and hard.silent_moves and rng.random() < HARD_SHARE:
            moved = random_move(data, rng, t)
            if moved is not None:
                done.append(("move", moved[0], str(moved[1])))
        elif op == "update" and data.silent_rate and rng.random() < data.silent_rate:
            changed = silent_change(data, rng)
            if changed is not None:
                done.append(("silent", changed[0], str(changed[1])))
        elif op == "update" and hard.late_commits and rng.random() < LATE_SHARE:
            rid = rng.choice(ids)
            if "updated_at" in data.by_type[t][rid].decoded():
                data.update_late(t, rid, lag=rng.choice(LATE_LAGS))
                done.append(("late", t, str(rid)))
        elif op == "update":
            rid = rng.choice(ids)
            data.update(t, rid)
            done.append(("update", t, str(rid)))
        elif hard.recreate_before_feed and rng.random() < RECREATE_SHARE:
            rid = rng.choice(ids)
            data.recreate(t, rid)
            done.append(("recreate", t, str(rid)))
        else:
            rid = rng.choice(ids)
            data.delete(t, rid)
            done.append(("delete", t, str(rid)))
    return done


def drop_current(data: Dataset, rng: random.Random) -> tuple[str, int] | None:
    """One row of a "current" list (a press release or a program) dropped out of every listing
    for `DROP_SECONDS` (`Hard.current_lists_drop`), listed again afterwards with its old stamp."""
    t = rng.choice(("press_releases", "programs"))
    shown = data.ids(t)
    if not shown:
        return None
    rid = rng.choice(shown)
    data.hide(t, rid, rng.uniform(*DROP_SECONDS))
    return t, rid


def silent_change(data: Dataset, rng: random.Random) -> tuple[str, int] | None:
    """One random silent update (`silent_update`): an attribute, a to-many link list, a
    sideloaded row's attribute, or a "current" press release or program moved to another
    mall's list. Returns (type, id) changed, or None when nothing could be."""
    kind = rng.choice(("attrs", "links", "sideload", "mall"))
    if kind == "sideload":
        t = rng.choice(SIDELOADED)
    elif kind == "mall":
        t = rng.choice(("press_releases", "programs"))
    elif kind == "links":
        t = rng.choice(("articles", "deals", "events", "products", "stores", "malls"))
    else:
        t = rng.choice([x for x in TYPES if x not in SIDELOADED])
    if not data.order[t]:
        return None
    rid = rng.choice(data.order[t])
    rec = data.by_type[t][rid]
    if kind == "mall":
        others = [m for m in data.order["malls"] if m != rec.mall]
        if not others:
            return None
        data.silent_update(t, rid, mall=rng.choice(others))
    elif kind == "links":
        names = [n for n in ("images", "tags", "groups") if n in rec.links]
        if not names:
            return None
        name = rng.choice(names)
        data.silent_update(t, rid, links={name: data.generator.sample(name, 3)})
    else:
        key = next(
            (k for k in ("title", "name", "description", "headline", "alt_text") if k in rec.attrs),
            None,
        )
        if key is None:
            return None
        data.silent_update(t, rid, attrs={key: f"{data.generator.words(3)} (silent)"})
    return t, rid


def random_move(data: Dataset, rng: random.Random, type_name: str) -> tuple[str, int] | None:
    """One silent move (`Hard.silent_moves`) of a row of `type_name` if it can be moved,
    else of another movable type."""
    movable = [*MOVABLE, *(["deals"] if data.hard.route_memberships else [])]
    t = type_name if type_name in movable else rng.choice(movable)
    if not data.order[t]:
        return None
    rid = rng.choice(data.order[t])
    current = data.malls_of(t, rid)
    others = [m for m in data.order["malls"] if m not in current]
    if not current or not others:
        return None
    data.move(t, rid, rng.choice(current), rng.choice(others))
    return t, rid
