"""The page write: staged rows bound to one prepared, guarded upsert per column set.

Writing a page is the hot path. sqlite-utils owns the schema (tables, new columns, indexes), but
the rows go through one prepared `INSERT ... ON CONFLICT(id) DO UPDATE ... WHERE
excluded.updated_at >= t.updated_at` per column set, run with `executemany`: measured at about
twice the speed of `upsert_all`, and sqlite-utils cannot express that guard, which the mirror
needs so an older copy of a row never overwrites a newer one (pages, polls and webhook fetches
race each other). The same guard holds for the row's links (`link_guard`). Rows arrive staged
(`sync.pipeline.staging.Staged`); this module binds them and never stages them itself. The
caller (`Mirror.write_staged`) runs it inside the page's transaction, after `ensure_schema`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from sync.pipeline.batches import Staged
from sync.store import links, memberships
from sync.store.fresh import FreshIds
from sync.store.links import Links
from sync.store.schema import Schema


@dataclass(frozen=True)
class WriteResult:
    """What one page write wrote: rows of the listed type, included rows, and rows a
    tombstone refused."""

    rows: int
    included: int
    skipped_deleted: int = 0


class PageWriter:
    """Binds staged batches: the statements it prepared, and the ids it knows are new."""

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        self.conn = conn
        self.schema = schema
        self._sql: dict[tuple[str, tuple[str, ...], bool], str] = {}
        # Ids written to the tables this mirror created (and owners whose links the mirror's
        # table handles wrote): an owner never written has no row and no links yet, so its
        # page write needs neither the guard's SELECT nor link DELETEs (`sync.store.fresh`).
        self.fresh = FreshIds()

    def ensure_schema(self, batches: Sequence[Staged]) -> None:
        """Tables, columns and link tables the batches need.

        Schema changes first: sqlite-utils commits on its own, so never inside our transaction.
        """
        main = batches[0] if batches else None
        if main is not None and main.rtype.level == "mall" and "mall_id" in main.columns:
            memberships.ensure(self.schema, main.type)
        for b in batches:
            rtype = b.rtype
            if b.ids:
                known = self.schema.columns(rtype.table)
                if not known or not known.issuperset(b.columns):
                    self.schema.ensure_content(rtype.table, {"id": b.ids[0], **b.samples})
                if not known and links.none_held(self.conn, self.schema, rtype):
                    # Created here, empty, and no link rows: every id of a row or link it gets
                    # from now on is recorded first (`FreshIds`: here, or by the table handles).
                    self.fresh.track(rtype.table)
                self.schema.widen(rtype.table, b.columns, b.rows)
            links.ensure(self.schema, rtype, b.links)

    def write(self, b: Staged) -> None:
        """Upsert one batch's rows and replace the links of those the guard let through."""
        own, new = self.link_guard(b)
        notes = links.feed_notes(self.conn, self.schema) if own else None  # before the upsert
        if b.ids:
            self.fresh.add(b.rtype.table, b.ids)
            self.conn.executemany(self.upsert_sql(b.rtype.table, b.columns), b.rows)
        links.write(self.conn, b.rtype, own, new, notes)

    def write_memberships(self, b: Staged) -> None:
        """The mall that listed a page's rows lists them: one (mall, row) pair each."""
        if b.rtype.level != "mall" or not b.ids or "mall_id" not in b.columns:
            return
        pos = b.columns.index("mall_id") + 1
        memberships.add(
            self.conn, b.type, [(row[pos], row[0]) for row in b.rows if row[pos] is not None]
        )

    def link_guard(self, b: Staged) -> tuple[Links, set[int]]:
        """The batch's links, less those of rows the upsert's guard will refuse; and the owners
        known to have no row before this upsert, hence no links (`links.write` deletes none).

        A row's relationships are part of the row: an older copy (a page fetched before a
        webhook fetch and written after it, a lagging replica upstream) must change neither
        its columns nor its links. Read before the upsert, in the same transaction, with the
        guard's own rule: a stored stamp wins over a missing or smaller one. Owners known
        absent (`FreshIds`: in a table this mirror created, never written) have nothing to
        compare and are not queried: in a first backfill, nearly all of them.
        """
        if not b.links or not b.ids:
            return b.links, set()
        table = b.rtype.table
        owners = {rid for pairs in b.links.values() for rid, _ in pairs}
        new = self.fresh.absent(table, owners)
        ask = [rid for rid in owners if rid not in new]
        if (
            not ask
            or "updated_at" not in b.columns
            or "updated_at" not in self.schema.columns(table)
        ):
            return b.links, new
        pos = b.columns.index("updated_at") + 1
        incoming = {row[0]: row[pos] for row in b.rows}
        older: set[int] = set()
        for start in range(0, len(ask), 500):
            chunk = ask[start : start + 500]
            for rid, stored in self.conn.execute(
                f"SELECT id, updated_at FROM [{table}] WHERE id IN "
                f"({','.join('?' * len(chunk))}) AND updated_at IS NOT NULL",
                chunk,
            ):
                stamp = incoming.get(rid)
                if stamp is None or stamp < stored:
                    older.add(rid)
        if not older:
            return b.links, new
        kept = {n: [(o, r) for o, r in pairs if o not in older] for n, pairs in b.links.items()}
        return kept, new

    def upsert_sql(self, table: str, cols: tuple[str, ...]) -> str:
        """INSERT ... VALUES ... ON CONFLICT(id) DO UPDATE ... WHERE the copy is not older."""
        guard = "updated_at" in cols
        key = (table, cols, guard)
        sql = self._sql.get(key)
        if sql is None:
            names = ", ".join(f"[{c}]" for c in ("id", *cols))
            marks = ", ".join("?" * (len(cols) + 1))
            # A mall-scoped row's `mall_id` is the lowest mall that lists it
            # (`sync.store.memberships`); elsewhere (events) it is a to-one relationship.
            scoped = table in memberships.MEMBER_TYPES
            sets = ", ".join(
                f"[{c}] = excluded.[{c}]"
                if c != "mall_id" or not scoped
                else f"[mall_id] = CASE WHEN [{table}].mall_id IS NULL OR excluded.mall_id < "
                f"[{table}].mall_id THEN excluded.mall_id ELSE [{table}].mall_id END"
                for c in cols
            )
            sql = f"INSERT INTO [{table}] ({names}) VALUES ({marks})"
            sql += (
                f" ON CONFLICT(id) DO UPDATE SET {sets}" if sets else " ON CONFLICT(id) DO NOTHING"
            )
            if guard and sets:
                sql += (
                    f" WHERE [{table}].updated_at IS NULL"
                    f" OR excluded.updated_at >= [{table}].updated_at"
                )
            self._sql[key] = sql
        return sql
