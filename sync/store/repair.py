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

from dataclasses import dataclass

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


def differences(schema: Schema, deletions: Deletions, b: Staged) -> list[Repair]:
    """The rows of `b` whose stored copy differs under the same stamp, or is missing (its
    tables made first: `PageWriter.ensure_schema`). Only the deletions feed's tombstones refuse
    copies (`sync.store.deletions`): a row a "current" list dropped and took back has none."""
    if not b.ids:
        return []
    table = b.rtype.table
    cols = b.columns
    stamp = "updated_at" in cols
    checks = ["updated_at" if stamp else "NULL", *(f"[{c}] IS NOT ?" for c in cols)]
    sql = f"SELECT {', '.join(checks)} FROM [{table}] WHERE id = ?"
    dead = deletions.held(b.type, b.ids)
    judge = Judge.now(deletions.window)
    tombstoned = {
        row[0]
        for row in b.rows
        if row[0] in dead
        and tombstone_verdict(
            dead[row[0]], row[cols.index("updated_at") + 1] if stamp else None, judge
        )
        != "lifted"
    }
    links = _stored_links(schema, b)
    served_links = {name: dict(pairs) for name, pairs in b.links.items() if name in links}
    pos = cols.index("updated_at") + 1 if stamp else 0
    out: list[Repair] = []
    for row in b.rows:
        rid = row[0]
        if rid in tombstoned:
            continue  # the write refuses it too: deleted upstream after this copy was made
        found = schema.conn.execute(sql, (*row[1:], rid)).fetchone()
        if found is None:
            out.append(Repair(b.type, rid, ("missing",)))
            continue
        if stamp and found[0] is not None and row[pos] != found[0]:
            continue  # newer: ordinary lag, not a repair; older: the write refuses it
        # A mall-scoped row's `mall_id` is the lowest of its malls (`sync.store.memberships`):
        # the copy of one mall's route naming another is no difference.
        what = [
            c
            for c, differs in zip(cols, found[1:], strict=True)
            if differs and not (c == "mall_id" and b.type in MEMBER_TYPES)
        ]
        for name, served in served_links.items():
            if rid in served and list(dict.fromkeys(served[rid])) != links[name].get(rid, []):
                what.append(f"links.{name}")
        if what:
            out.append(Repair(b.type, rid, tuple(what)))
    return out


def _stored_links(schema: Schema, b: Staged) -> dict[str, dict[int, list[int]]]:
    """The batch owners' stored links, per relationship, in position order."""
    out: dict[str, dict[int, list[int]]] = {}
    for rel in b.rtype.relationships:
        pairs = b.links.get(rel.name)
        if rel.to_one or not pairs:
            continue
        table = rel.link_table(b.type)
        per: dict[int, list[int]] = out.setdefault(rel.name, {})
        if not schema.has_table(table):
            continue
        owner, other = rel.link_columns(b.type)
        owners = [o for o, _ in pairs]
        for o, t in schema.conn.execute(
            f"SELECT [{owner}], [{other}] FROM [{table}] WHERE [{owner}] IN "
            f"({','.join('?' * len(owners))}) ORDER BY [{owner}], position",
            owners,
        ):
            per.setdefault(int(o), []).append(int(t))
    return out
