"""Compare-and-repair: the verify's write, which replaces a row whose content differs from a
whole copy served under the same `updated_at`, and says what differed.

The page write (`Mirror.write_staged`) already lets an equal stamp overwrite, but nothing ever
sends it such a copy: polls and the reconcile only fetch rows whose stamp moved, and included
rows identical by version to the last written copy are skipped. The verify fetches every row
whole and comes here. Each row of each batch (the listed type's and the included ones) is
compared column by column in SQL (`[c] IS NOT ?`, so SQLite applies the column's affinity to
the served value exactly as the write would), and its to-many links in order; to-one
relationships are columns and are compared with them (a mall-scoped row's `mall_id` is not:
its malls are its memberships, which the reconcile's listings keep).

Only differences under an equal stamp (or on rows without one: tags, groups) are repairs: a
copy with a newer stamp is ordinary lag, written but not counted, and an older copy (a lagging
replica) never wins, exactly as in the page write, which does the writing. `Mirror.repair`
compares (`differences`), then writes the page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sync.pipeline.batches import Staged
from sync.store.deletions import Deletions, Judge, tombstone_verdict
from sync.store.memberships import MEMBER_TYPES
from sync.store.schema import Schema


@dataclass(frozen=True)
class Repair:
    """One row the verify repaired: its type, id and what differed (column names,
    `links.<relationship>`, or `missing`); never the values (they may be personal data)."""

    type: str
    id: int
    what: tuple[str, ...]


#: Per relationship, per owner: the related ids held, in position order.
StoredLinks = dict[str, dict[int, list[int]]]


@dataclass(frozen=True)
class Found:
    """What a store found of one served row in its table: nothing (`missing`), or its stored
    `updated_at` (None: none) and the columns whose stored value differs from the served."""

    missing: bool
    stamp: Any = None
    differing: tuple[str, ...] = ()

    @classmethod
    def row(cls, stamp: Any, columns: Sequence[str], differs: Sequence[Any]) -> Found:
        """A stored row: its stamp, and the `columns` whose flag in `differs` is true."""
        return cls(False, stamp, tuple(c for c, d in zip(columns, differs, strict=True) if d))


class Judging:
    """The verify's rule for one batch, written once for both stores: which rows a tombstone
    refuses (the write refuses them too), and which compares are repairs (`repair`). A store
    compares each row its own way (`differences` here, `sync.store.pg.repair` there) and asks."""

    def __init__(self, deletions: Deletions, b: Staged, stored_links: StoredLinks) -> None:
        self.b = b
        self.stored_links = stored_links
        self.served_links = {n: dict(pairs) for n, pairs in b.links.items() if n in stored_links}
        self.stamp = b.columns.index("updated_at") + 1 if "updated_at" in b.columns else None
        dead = deletions.held(b.type, b.ids)
        judge = Judge.now(deletions.window)
        self.refused = {
            row[0]
            for row in b.rows
            if row[0] in dead
            and tombstone_verdict(dead[row[0]], self.served_stamp(row), judge) != "lifted"
        }

    def served_stamp(self, row: tuple[Any, ...]) -> Any:
        """A staged row's `updated_at` (None: the batch has none)."""
        return None if self.stamp is None else row[self.stamp]

    def repair(self, rid: int, served_stamp: Any, found: Found) -> Repair | None:
        """The repair one compare makes, if any: a missing row; under an equal stamp (or on
        rows without one), each differing column and each differing to-many link list. A
        stored stamp other than the served one is lag (newer served) or a copy the write
        refuses (older): never a repair. Rows in `refused` are the caller's to leave out."""
        b = self.b
        if found.missing:
            return Repair(b.type, rid, ("missing",))
        if self.stamp is not None and found.stamp is not None and served_stamp != found.stamp:
            return None
        # A mall-scoped row's `mall_id` is the lowest of its malls (`sync.store.memberships`):
        # the copy of one mall's route naming another is no difference.
        what = [c for c in found.differing if not (c == "mall_id" and b.type in MEMBER_TYPES)]
        for name, served in self.served_links.items():
            held = self.stored_links[name].get(rid, [])
            if rid in served and list(dict.fromkeys(served[rid])) != held:
                what.append(f"links.{name}")
        return Repair(b.type, rid, tuple(what)) if what else None

    def repairs(self, compared: Iterable[tuple[int, Any, Found]]) -> list[Repair]:
        """The repairs of a store's compares (id, served stamp, what it found), in their
        order; a row a tombstone refuses is left out, as the write leaves it out."""
        out: list[Repair] = []
        for rid, served_stamp, found in compared:
            repair = None if rid in self.refused else self.repair(rid, served_stamp, found)
            if repair is not None:
                out.append(repair)
        return out


#: Reads one link table's held lists: (table, (owner column, other column), owners) ->
#: owner -> related ids in position order; a store's own statement.
HeldLists = Callable[[str, tuple[str, str], list[int]], dict[int, list[int]]]


def stored_links(b: Staged, has_table: Callable[[str], bool], read: HeldLists) -> StoredLinks:
    """The batch owners' stored to-many links, per relationship the batch serves, in position
    order (empty where the link table does not exist yet): what `Judging` compares."""
    out: StoredLinks = {}
    for rel in b.rtype.relationships:
        pairs = b.links.get(rel.name)
        if rel.to_one or not pairs:
            continue
        table = rel.link_table(b.type)
        owners = sorted({o for o, _ in pairs})
        out[rel.name] = read(table, rel.link_columns(b.type), owners) if has_table(table) else {}
    return out


def differences(schema: Schema, deletions: Deletions, b: Staged) -> list[Repair]:
    """The rows of `b` whose stored copy differs under the same stamp, or is missing (its
    tables made first: `PageWriter.ensure_schema`), by `Judging`'s rule. Only the deletions
    feed's tombstones refuse copies (`sync.store.deletions`): a row a "current" list dropped
    and took back has none. Each column is compared in SQL (`[c] IS NOT ?`), so SQLite applies
    the column's affinity to the served value exactly as the write would."""
    if not b.ids:
        return []
    cols = b.columns
    stamp = "updated_at" in cols
    checks = ["updated_at" if stamp else "NULL", *(f"[{c}] IS NOT ?" for c in cols)]
    sql = f"SELECT {', '.join(checks)} FROM [{b.rtype.table}] WHERE id = ?"
    judging = Judging(deletions, b, stored_links(b, schema.has_table, _held(schema)))

    def compared() -> Iterator[tuple[int, Any, Found]]:
        for row in b.rows:
            got = schema.conn.execute(sql, (*row[1:], row[0])).fetchone()
            found = Found(missing=True) if got is None else Found.row(got[0], cols, got[1:])
            yield row[0], judging.served_stamp(row), found

    return judging.repairs(compared())


def _held(schema: Schema) -> HeldLists:
    """SQLite's read of held link lists (`stored_links`)."""

    def read(table: str, columns: tuple[str, str], owners: list[int]) -> dict[int, list[int]]:
        owner, other = columns
        out: dict[int, list[int]] = {}
        for o, t in schema.conn.execute(
            f"SELECT [{owner}], [{other}] FROM [{table}] WHERE [{owner}] IN "
            f"({','.join('?' * len(owners))}) ORDER BY [{owner}], position",
            owners,
        ):
            out.setdefault(int(o), []).append(int(t))
        return out

    return read
