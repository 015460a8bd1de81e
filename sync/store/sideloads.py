"""Sideloads: included rows no listing owns, kept in step by the reconcile, and pruned.

Images, tags and groups reach the mirror only as included resources of the rows that link to
them. The reconcile (`sync.jobs.malls.sideloads`) lists owners with their linkage and includes: a
linkage may change under an unchanged `updated_at`, so it replaces the links (and to-one
columns) of exactly those owners whose mirrored stamp equals the listed one (`same_stamp`,
`write_to_one`); others are the refetch's. A sideloaded row that nothing links to any more is
pruned (`prune_unreferenced`).

Which rows reference a sideload is `references`'s, written once for both stores; the SQLite
statements are this module's functions, PostgreSQL's `sync.store.pg.sideloads`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.store import links
from sync.store.schema import HasColumns, Schema
from sync.store.transaction import write_transaction


def same_stamp(
    conn: sqlite3.Connection,
    schema: Schema,
    rtype: ResourceType,
    owners: Sequence[int],
    stamps: dict[int, Any],
) -> set[int]:
    """Those of `owners` whose mirrored `updated_at` equals the listed one (`stamps`)."""
    cols = schema.columns(rtype.table)
    if not owners or not cols:
        return set()
    col = "updated_at" if "updated_at" in cols else "NULL"
    same: set[int] = set()
    for start in range(0, len(owners), 500):
        chunk = list(owners[start : start + 500])
        for rid, stored in conn.execute(
            f"SELECT id, {col} FROM [{rtype.table}] WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            if stored == stamps.get(rid):
                same.add(rid)
    return same


def write_to_one(
    conn: sqlite3.Connection,
    schema: Schema,
    rtype: ResourceType,
    column: str,
    values: Sequence[tuple[int, Any]],
    stamps: dict[int, Any],
) -> int:
    """`column` of the listed owners whose mirrored `updated_at` equals the listed one (the
    linkage changed under an unchanged stamp); returns the rows changed."""
    table = rtype.table
    cols = schema.columns(table)
    if column not in cols or "updated_at" not in cols:
        return 0
    with write_transaction(conn):
        return sum(
            conn.execute(
                f"UPDATE [{table}] SET [{column}] = ? WHERE id = ? AND updated_at IS ? "
                f"AND [{column}] IS NOT ?",
                (value, rid, stamps.get(rid), value),
            ).rowcount
            for rid, value in values
        )


def prune_unreferenced(
    conn: sqlite3.Connection, schema: Schema, types: Sequence[str]
) -> dict[str, int]:
    """Delete rows of `types` that no link table or to-one column references, then the links
    those rows owned. In `types` order: an image pruned first frees its tags."""
    removed: dict[str, int] = {}
    for target in types:
        if not schema.columns(target):
            continue
        refs = [_select(r) for r in references(schema, target, types)]
        where = f"id NOT IN ({' UNION '.join(refs)})" if refs else "1"
        with write_transaction(conn):
            n = conn.execute(f"DELETE FROM [{target}] WHERE {where}").rowcount
            for table, owner in links.owned(schema, catalogue.TYPES[target]):
                conn.execute(
                    f"DELETE FROM [{table}] WHERE [{owner}] NOT IN (SELECT id FROM [{target}])"
                )
        if n:
            removed[target] = n
    return removed


@dataclass(frozen=True)
class Reference:
    """A select of ids a mirror should hold: `column` of every row of `table`, or, when `owner`
    is given, of the rows whose `owner` is among the ids that any of `of` selects."""

    table: str
    column: str
    owner: str | None = None
    of: tuple[Reference, ...] = ()


def direct_references(
    schema: HasColumns, target: str, sideloaded: Sequence[str]
) -> list[Reference]:
    """The `target` ids that rows of listed (not sideloaded) types link to: their to-one
    columns and their link tables', those that exist, in the catalogue's order."""
    refs: list[Reference] = []
    for name, rtype in catalogue.TYPES.items():
        if name in sideloaded:
            continue
        for rel in rtype.relationships:
            if rel.target != target:
                continue
            if rel.to_one:
                if rel.column in schema.columns(name):
                    refs.append(Reference(name, rel.column))
            elif schema.columns(table := rel.link_table(name)):
                refs.append(Reference(table, rel.link_columns(name)[1]))
    return refs


def references(schema: HasColumns, target: str, sideloaded: Sequence[str]) -> list[Reference]:
    """Every `target` id the mirror should hold: those listed rows link to, and one level
    further, those linked from sideloaded rows listed rows link to (`images.tags`, `tags.tags`:
    what the include paths of `catalogue.include_paths` deliver). None at all: nothing can
    reference a `target` row, so `prune_unreferenced` removes them all."""
    refs = direct_references(schema, target, sideloaded)
    for name in sideloaded:
        for rel in catalogue.TYPES[name].relationships:
            table = rel.link_table(name)
            if rel.target != target or rel.to_one or not schema.columns(table):
                continue
            owners = direct_references(schema, name, sideloaded)
            if owners:
                owner, other = rel.link_columns(name)
                refs.append(Reference(table, other, owner, tuple(owners)))
    return refs


def _select(ref: Reference) -> str:
    """`ref` as SQLite's SELECT."""
    head = f"SELECT [{ref.column}] FROM [{ref.table}]"
    if ref.owner is None:
        return head
    return f"{head} WHERE [{ref.owner}] IN ({' UNION '.join(_select(o) for o in ref.of)})"
