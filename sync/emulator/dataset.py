"""The data set a running emulator serves: generated from a seed, changed as an upstream's editors would.

`Dataset(resources=N, seed=S)` holds the rows (`sync.emulator.rows`) the generator makes
(`sync.emulator.generator`), with one mall per mall-scoped resource (several, and an explicit set
for deals, under the hard readings of `sync.emulator.hard`; see `sync.emulator.memberships`).
Its mutations (create, update, delete, move) keep `updated_at` strictly increasing per resource
(millisecond precision, several updates within one second possible), append to the deletions
feed, and notify listeners (the webhooks). An edited or deleted image/tag/group leaves its
owners' `updated_at` alone unless `touch_owners` is set (like Rails `touch: true`): the spec
does not promise it, so the emulator serves the hard case by default. `silent_update` changes a
resource's content (attributes, links, a mall-scoped row's mall) without touching its
`updated_at` and without a notice, as a legacy bulk SQL update does. Random changes over time
are `sync.emulator.churn`'s; rows leaving a listing while it is walked, `sync.emulator.shifting`'s.

Every mutation bumps the type's version, which invalidates the query caches and the ETags, and
the record's revision, which retires its cached encodings.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left, insort
from collections.abc import Callable
from typing import Any

from sync.emulator import memberships
from sync.emulator.commits import STAMP_LAG, LateCommits, Pending, bulk_stamp
from sync.emulator.generator import Generator
from sync.emulator.hard import Hard
from sync.emulator.late import Late
from sync.emulator.records import Rec
from sync.emulator.rows import Rows
from sync.emulator.spec import MALL_SCOPED, SIDELOADED, TARGET, TYPES
from sync.emulator.stamps import Stamps, seconds
from sync.model.columns import NULLABLE
from sync.model.stamps import iso_ms

Listener = Callable[[str, str, int, str | None], None]  # (kind, type, id, deletion id)


class Dataset(Rows):
    """The rows of one seed, with the mutation API."""

    def __init__(
        self,
        resources: int = 500,
        seed: int = 1,
        clock: Callable[[], float] = time.time,
        *,
        malls: int | None = None,
        hard: Hard | None = None,
    ) -> None:
        super().__init__(seed, hard if hard is not None else Hard())
        self.clock = clock
        self.listeners: list[Listener] = []
        self.stamps = Stamps()
        # Whether editing or deleting an image/tag/group also touches its owners (Rails
        # `touch: true`). The spec does not promise it, so by default owners keep their
        # `updated_at` (the hard case: only a sideload refresh sees such a change).
        self.touch_owners = False
        # Serve absolute stamps in several ISO 8601 forms of the same instant (`--stamp-forms`).
        self.stamp_forms = False
        # Whether deletions are listed in the deletions feed (off: an upstream whose feed
        # lost entries, so only a reconcile's listing can find them).
        self.feed_deletions = True
        # Share of `churn.mutate_randomly`'s updates made silently (`silent_update`,
        # `--silent-rate`).
        self.silent_rate = 0.0
        # The deleted ids per type, which `Hard.reuse_ids` hands out again.
        self.freed: dict[str, list[int]] = {}
        self.shifted = 0  # rows that left a listing being walked (`shifting_listings`)
        self.shift_asks = 0  # requests for a page >= 2 seen under `shifting_listings`
        # Draws of the hard readings at run time (a created deal's malls, the row that leaves
        # a listing, ...), apart from the generator's so the generated data stay the same.
        self.hard_rng = random.Random(f"{seed}:hard")
        # Feed entries not listed yet and rows a "current" list dropped (`sync.emulator.late`).
        self.late = Late()
        # Changes stamped, not yet visible (`Hard.late_commits`, `sync.emulator.commits`).
        self.commits = LateCommits()
        self.generator = Generator(self, seed)
        self.generator.build(max(resources, 50), malls)
        self.sync_hard()

    def now(self) -> float:
        """The clock stamps are taken by: the `Date` clock, `STAMP_LAG` behind it under
        `Hard.stamps_behind_date`."""
        return self.clock() - (STAMP_LAG if self.hard.stamps_behind_date else 0.0)

    # -- time: late commits and bulk stamps (`sync.emulator.commits`) --------------------------

    def update_late(
        self, type_name: str, rid: int, attrs: dict[str, Any] | None = None, *, lag: float
    ) -> str:
        """An update stamped now that becomes visible (listings, `filter[id]`, its notice)
        only `lag` seconds later, on the `Date` clock; returns its stamp."""
        rec = self.by_type[type_name][rid]
        self.settle_row(type_name, rid)
        current = rec.decoded()
        if attrs is None:
            key = next((k for k in ("title", "name", "headline") if k in current), None)
            attrs = {key: f"{self.generator.words(3)} (late)"} if key else {}
        stamp = self.fresh_stamp(current.get("updated_at"))
        self.commits.hold(type_name, rid, Pending(self.clock() + lag, stamp, dict(attrs)))
        return stamp

    def settle(self, until: float | None = None) -> None:
        """Make visible the late commits whose time has come (by `until` on the `Date` clock
        when given: `float("inf")` commits every one, an upstream come to rest)."""
        for (type_name, rid), change in self.commits.due(self.clock() if until is None else until):
            self._commit(type_name, rid, change)

    def settle_row(self, type_name: str, rid: int) -> None:
        """Make the row's pending change visible now (before another change of the row)."""
        change = self.commits.take(type_name, rid)
        if change is not None:
            self._commit(type_name, rid, change)

    def _commit(self, type_name: str, rid: int, change: Pending) -> None:
        rec = self.by_type[type_name].get(rid)
        current = rec.decoded() if rec is not None else {}
        held = str(current.get("updated_at") or "")
        if rec is None or held > change.stamp:
            return  # never a stamp moved back (the row changed since, under a later stamp)
        if held == change.stamp and not self.hard.whole_second_stamps:
            return  # stamps never repeat but under whole seconds
        self.remember(rec)
        merged = {**current, **change.attrs, "updated_at": change.stamp}
        rec.set_attrs(merged)
        self.revise(rec)
        self.version[type_name] += 1
        self.notify("update", type_name, rid)

    def bulk_update(
        self, type_name: str, ids: list[int], attrs: dict[str, Any] | None = None
    ) -> str | None:
        """Update every row of `ids` under one new stamp (a bulk SQL update: a tie run);
        returns the stamp (None when the type has no `updated_at`)."""
        recs = [self.by_type[type_name][i] for i in ids]
        for rec in recs:
            self.settle_row(type_name, rec.id)
        current = [rec.decoded() for rec in recs]
        if not current or "updated_at" not in current[0]:
            return None
        stamp = self.fresh_stamp(bulk_stamp([c.get("updated_at") for c in current]))
        for rec, doc in zip(recs, current, strict=True):
            self.remember(rec)
            rec.set_attrs({**doc, **(attrs or {}), "updated_at": stamp})
            self.revise(rec)
        self.version[type_name] += 1
        for rec in recs:
            self.notify("update", type_name, rec.id)
        return stamp

    def bulk_delete(self, type_name: str, ids: list[int]) -> str:
        """Delete every row of `ids` in one statement: their feed entries share one stamp (a
        `DELETE ... WHERE`); returns it."""
        stamp = self.fresh_stamp(None)
        for rid in ids:
            if rid in self.by_type[type_name]:
                self.delete(type_name, rid, stamp=stamp)
        return stamp

    def fresh_stamp(self, previous: str | None) -> str:
        """A new updated_at: now, but strictly after the previous one and the last issued."""
        return self.stamps.fresh(self.now(), previous, whole=self.hard.whole_second_stamps)

    def notify(self, kind: str, type_name: str, rid: int, deletion: str | None = None) -> None:
        for listener in list(self.listeners):
            listener(kind, type_name, rid, deletion)

    # -- hard readings -------------------------------------------------------------------------

    def sync_hard(self) -> None:
        """Catch up with switches assigned since the last call (`memberships.catch_up`)."""
        memberships.catch_up(self)

    def ids(self, type_name: str, mall: int | None = None) -> list[int]:
        """Ids in order (a shared list: do not mutate), under the switches as they are now;
        rows a "current" list dropped for now left out (`Hard.current_lists_drop`)."""
        if mall is not None:
            self.sync_hard()
        ids = super().ids(type_name, mall)
        if self.late.hidden:
            return self.late.visible(type_name, ids)
        return ids

    def due(self) -> None:
        """Before a request is served: feed entries whose time came are listed, dropped rows
        whose time came are listed again (`sync.emulator.late`)."""
        if self.late.pending or self.late.hidden:
            self.late.due(self)

    def hide(self, type_name: str, rid: int, seconds: float) -> None:
        """Drop a row out of every listing and `filter[id]` for `seconds`, keeping it and its
        stamp, with no feed entry and no notice (`Hard.current_lists_drop`)."""
        self.late.hide(self, type_name, rid, seconds)

    def recreate(self, type_name: str, rid: int) -> Rec:
        """Delete `rid` (feed entry, notice) and create it again at once under the same id,
        with fresh stamps later than the entry (`Hard.recreate_before_feed`), or up to a
        second before it (`Hard.recreated_before_entry`)."""
        mall = self.by_type[type_name][rid].mall
        entry = self.delete(type_name, rid)
        rec = self.create(type_name, mall=mall if mall in self.by_type["malls"] else None, rid=rid)
        current = rec.decoded()
        if self.hard.recreated_before_entry and "updated_at" in current:
            behind = self.hard_rng.uniform(0.1, 0.99)
            stamp = iso_ms(seconds(str(entry.decoded()["created_at"])) - behind)
            rec.set_attrs({**current, "created_at": stamp, "updated_at": stamp})
            self.revise(rec)
            self.version[type_name] += 1
        return rec

    def malls_of(self, type_name: str, rid: int) -> list[int]:
        """The sorted ids of the malls whose `/malls/{id}/<type>` route lists the row (several
        under `multi_mall`; a deal's: by `route_memberships` or the national/local rule)."""
        self.sync_hard()
        return memberships.malls_of(self, type_name, rid)

    def move(self, type_name: str, rid: int, from_mall: int, to_mall: int) -> Rec:
        """Move a mall-scoped row (or, under `route_memberships`, a deal) from one of its malls
        to another, keeping `updated_at`, with no notice and no feed entry (the spec shows no
        rule; see `Hard.silent_moves`). ValueError when the move is not possible."""
        self.sync_hard()
        rec = self.by_type[type_name][rid]
        memberships.move(self, rec, from_mall, to_mall)
        self.untouched(rec)
        self.version["malls"] += 1  # a mall's members change
        return rec

    def create(
        self,
        type_name: str,
        attrs: dict[str, Any] | None = None,
        mall: int | None = None,
        *,
        rid: int | None = None,
    ) -> Rec:
        """A new row (an update notice); `rid`: under that deleted id."""
        if type_name not in TYPES and type_name != "malls":
            raise KeyError(type_name)
        if mall is None:
            mall = self.generator.pick_mall(type_name)
        self.sync_hard()
        freed = self.freed.get(type_name) if self.hard.reuse_ids or rid is not None else None
        if rid is not None and freed and rid in freed:
            freed.remove(rid)
        elif rid is None:
            rid = freed.pop() if freed else None
        if rid is not None:
            self.previous.pop((type_name, rid), None)  # the deleted row's copy is not this one's
        rec = self.generator.generate(type_name, mall, attrs, rid)
        current = rec.decoded()
        if "created_at" in current:
            stamp = self.fresh_stamp(None)
            rec.set_attrs({**current, "created_at": stamp, "updated_at": stamp})
        self.revise(rec)
        self.add(rec)
        if type_name == "deals" and self.hard.route_memberships:
            memberships.give_deal_malls(self, rec, self.hard_rng, 2)
        self.notify("update", type_name, rec.id)
        return rec

    def null_first(self, rows: int = 100) -> None:
        """Serve null for every nullable attribute (spec: "or null", "nullable") on the first
        `rows` rows of each type (a whole first backfill page): the hard case for a client
        that would type its columns from the first values it sees. Stamps are left alone."""
        for type_name, names in NULLABLE.items():
            for rid in self.order[type_name][:rows]:
                self.set_attrs(self.by_type[type_name][rid], dict.fromkeys(names))
            self.version[type_name] += 1

    def touch(self, rec: Rec, attrs: dict[str, Any] | None = None) -> None:
        self.settle_row(rec.type, rec.id)
        self.remember(rec)
        merged = rec.decoded()
        if attrs:
            merged.update(attrs)
        if "updated_at" in merged:
            merged["updated_at"] = self.fresh_stamp(merged["updated_at"])
        rec.set_attrs(merged)
        self.revise(rec)
        self.version[rec.type] += 1

    def update(self, type_name: str, rid: int, attrs: dict[str, Any] | None = None) -> Rec:
        rec = self.by_type[type_name][rid]
        if attrs is None:
            current = rec.decoded()
            key = next(
                (k for k in ("title", "name", "description", "headline") if k in current), None
            )
            attrs = {key: self.generator.words(3)} if key else {}
        self.touch(rec, attrs)
        self.notify("update", type_name, rid)
        if type_name in SIDELOADED:
            for owner_type, owner_id in sorted(self.owners.get((type_name, rid), ())):
                owner = self.by_type[owner_type].get(owner_id)
                if owner is None:
                    continue
                if self.touch_owners:
                    self.touch(owner)
                    self.notify("update", owner_type, owner_id)
                else:
                    self.version[owner_type] += 1  # pages that include it change; stamps do not
        return rec

    def silent_update(
        self,
        type_name: str,
        rid: int,
        attrs: dict[str, Any] | None = None,
        links: dict[str, Any] | None = None,
        mall: int | None = None,
    ) -> Rec:
        """Change `rid`'s attributes, linkage (rel name -> ids, or an id for a to-one) or mall,
        keeping its `updated_at` and sending no notice (a legacy bulk SQL update). Pages that
        include a changed image, tag or group change with it, their owners' stamps do not."""
        rec = self.by_type[type_name][rid]
        if attrs:
            if "updated_at" in attrs or "created_at" in attrs:
                raise ValueError("a silent update keeps the stamps")
            rec.attrs.update(attrs)
        if mall is not None and self.memberships and (type_name, rid) in self.memberships:
            if rec.mall is not None and mall != rec.mall:  # a multi-mall row: its first is replaced
                others = [m for m in self.memberships[(type_name, rid)] if m != rec.mall]
                memberships.set_malls(self, rec, [*others, mall])
                self.version["malls"] += 1
            mall = None
        self.unindex(rec)
        changed: dict[str, Any] = {}
        for name, value in (links or {}).items():
            changed[name] = list(value) if isinstance(value, list) else value
            target = TARGET.get(name, name)
            if target in self.version:
                self.version[target] += 1  # their inverse linkage changes with it
        if mall is not None and rec.mall is not None and mall != rec.mall:
            old_list = self.by_mall[(type_name, rec.mall)]
            del old_list[bisect_left(old_list, rid)]
            insort(self.by_mall.setdefault((type_name, mall), []), rid)
            rec.mall = mall
            if "mall" in rec.links:
                changed["mall"] = mall
            self.version["malls"] += 1  # a mall's members change
        if changed:
            rec.set_links(changed)  # `rec.links` is a copy: linkage changes go through here
        self.index(rec)
        self.untouched(rec)
        if type_name in SIDELOADED:
            for owner_type, _ in self.owners.get((type_name, rid), ()):
                self.version[owner_type] += 1  # pages that include it change; stamps do not
        return rec

    def untouched(self, rec: Rec) -> None:
        """A change to `rec`'s linkage that leaves its `updated_at` as it was."""
        self.previous.pop((rec.type, rec.id), None)  # its older copy would now be newer
        self.revise(rec)
        self.version[rec.type] += 1

    def delete(self, type_name: str, rid: int, *, stamp: str | None = None) -> Rec:
        """Delete a resource (and a mall's resources); returns the deletions entry, dated
        `stamp` when given (one statement's deletions, `bulk_delete`)."""
        self.sync_hard()
        rec = self.by_type[type_name][rid]
        if type_name == "malls":
            self.empty_mall(rid)
        self.drop(rec)
        stamp = stamp or self.fresh_stamp(None)
        did = self.next_id["deletions"]
        self.next_id["deletions"] += 1
        entry = Rec(
            "deletions",
            did,
            {
                "resource_id": rid,
                "resource_type": type_name,
                "created_at": stamp,
                "updated_at": stamp,
            },
        )
        if self.feed_deletions:
            self.late.publish(self, entry)
        self.notify("deletion", type_name, rid, str(did))
        return entry

    def empty_mall(self, mall: int) -> None:
        """Before `mall` is deleted: a row also in other malls leaves it; a row only in it is
        deleted (with its feed entry and notice) or, under `Hard.mall_delete_alone`, vanishes
        without either; a deal of `route_memberships` leaves it."""
        alone = self.hard.mall_delete_alone
        for child_type in sorted(MALL_SCOPED):
            for child in list(self.by_mall.get((child_type, mall), [])):
                rec = self.by_type[child_type][child]
                if self.memberships and (child_type, child) in self.memberships:
                    memberships.leave(self, rec, mall)
                    self.untouched(rec)
                elif alone:
                    self.drop(rec)
                else:
                    self.delete(child_type, child)
        for deal in list(self.by_mall.get(("deals", mall), [])):
            memberships.leave(self, self.by_type["deals"][deal], mall)
            self.untouched(self.by_type["deals"][deal])

    def drop(self, rec: Rec) -> None:
        """Take `rec` out of the data set and out of its owners' to-many linkage (no feed entry,
        no notice of its own)."""
        type_name, rid = rec.type, rec.id
        # A change still pending dies with the row (committed, then deleted: the same end); it
        # must never land on a row created again under the id.
        self.commits.take(type_name, rid)
        self.remove(rec)
        self.freed.setdefault(type_name, []).append(rid)  # `Hard.reuse_ids` takes it back
        # Owners' to-many links drop the deleted resource (a join row deleted with it); their
        # `updated_at` moves only with `touch_owners` (the spec does not promise it).
        for owner_type, owner_id in sorted(self.owners.pop((type_name, rid), set())):
            owner = self.by_type[owner_type].get(owner_id)
            if owner is None:
                continue
            dropped = {
                name: [i for i in value if i != rid]
                for name, value in owner.link_items()
                if TARGET.get(name, name) == type_name and isinstance(value, tuple) and rid in value
            }
            if not dropped:
                continue
            owner.set_links(dropped)  # the target's index entry is gone already
            if self.touch_owners:
                self.touch(owner)
                self.notify("update", owner_type, owner_id)
            else:
                self.untouched(owner)
