"""Compare a mirror file with the emulator's data, type by type, row by row.

Shared by the backfill, daemon and chaos suites: the mirror must hold exactly the rows the
upstream serves (nothing missing, nothing extra) with the values it serves (nothing stale).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sync.emulator import Emulator
from sync.model import catalogue


def _as_stored(value: Any) -> Any:
    """The emulator's attribute value as the mirror stores it."""
    if isinstance(value, bool):
        return int(value)
    return value


def _from_column(value: Any, upstream: Any) -> Any:
    if isinstance(upstream, dict | list) and isinstance(value, str | bytes):
        return orjson.loads(value)
    return value


@dataclass
class Comparison:
    """Differences between a mirror and the emulator."""

    rows_compared: int = 0
    sideloads_compared: int = 0  # images, tags, groups (a full compare only)
    missing: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, list[str]] = field(default_factory=dict)
    stale: dict[str, list[str]] = field(default_factory=dict)
    links_compared: int = 0
    stale_links: dict[str, list[str]] = field(default_factory=dict)
    memberships_compared: int = 0

    @property
    def differences(self) -> int:
        kinds = (self.missing, self.extra, self.stale, self.stale_links)
        return sum(len(v) for d in kinds for v in d.values())

    def summary(self) -> str:
        parts = []
        kinds = (
            ("missing", self.missing),
            ("extra", self.extra),
            ("stale", self.stale),
            ("stale relationships", self.stale_links),
        )
        for label, d in kinds:
            for t, ids in d.items():
                if ids:
                    parts.append(f"{label} {t}: {ids[:10]}{'...' if len(ids) > 10 else ''}")
        return "; ".join(parts) or "identical"


def upstream_malls(emu: Emulator, type_name: str, rid: str | int) -> set[int]:
    """The malls whose routes list a mall-scoped row upstream."""
    many = getattr(emu.data, "malls_of", None)
    if many is not None:
        return {int(m) for m in many(type_name, int(rid))}
    one = emu.mall_of(type_name, rid)
    return {int(one)} if one is not None else set()


def _memberships(conn: sqlite3.Connection, tables: set[str], name: str) -> dict[int, set[int]]:
    """row id -> the malls the mirror's `malls_<type>` holds for it."""
    out: dict[int, set[int]] = {}
    if f"malls_{name}" in tables:
        for mall, rid in conn.execute(f"select malls_id, {name}_id from [malls_{name}]"):
            out.setdefault(int(rid), set()).add(int(mall))
    return out


def watch_deletions(mirror_path: Path) -> None:
    """Log every row deleted from the mirror's content tables (`_test_deleted`), so a test can
    count live rows lost even when a later pass brings them back."""
    conn = sqlite3.connect(mirror_path)
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _test_deleted (type TEXT, id INTEGER, "
            "at REAL DEFAULT (julianday('now')))"
        )
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        for name in catalogue.TYPES:
            if name in tables:
                conn.execute(
                    f"CREATE TRIGGER IF NOT EXISTS [_test_deleted_{name}] AFTER DELETE ON [{name}] "
                    f"BEGIN INSERT INTO _test_deleted (type, id) VALUES ('{name}', old.id); END"
                )
        conn.commit()
    finally:
        conn.close()


def lost_rows(
    mirror_path: Path,
    emu: Emulator,
    deleted: set[tuple[str, int]],
    types: list[str] | None = None,
) -> list[str]:
    """Rows the mirror deleted while the upstream still holds them and never deleted them
    (`deleted`: every (type, id) the emulator deleted, from its listener): live rows lost.
    `types`: the mirrored types (a sideload only they no longer link to is not lost)."""
    conn = sqlite3.connect(f"file:{mirror_path}?mode=ro", uri=True)
    try:
        gone = set(conn.execute("select type, id from _test_deleted"))
    finally:
        conn.close()
    out = []
    referenced = referenced_sideloads(emu, types)
    for name, rid in sorted(gone):
        if (name, int(rid)) in deleted:
            continue
        if not catalogue.TYPES[name].listable and str(rid) not in referenced[name]:
            continue  # a sideload no owner links to any more is not the mirror's to hold
        if name in emu.data.by_type and int(rid) in emu.data.by_type[name]:
            out.append(f"{name}.{rid}")
    return out


def record_deletions(emu: Emulator) -> set[tuple[str, int]]:
    """A set that fills with every (type, id) the emulator deletes from now on."""
    out: set[tuple[str, int]] = set()

    def listener(kind: str, type_name: str, rid: int, deletion: str | None) -> None:
        if kind == "deletion":
            out.add((type_name, int(rid)))

    emu.data.listeners.append(listener)
    return out


def compare(mirror_path: Path, emu: Emulator, types: list[str] | None = None) -> Comparison:
    """Compare every listable type (or `types`) of the mirror at `mirror_path` with `emu`."""
    out = Comparison()
    conn = sqlite3.connect(f"file:{mirror_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        for name in types or list(catalogue.LISTABLE):
            upstream = emu.snapshot(name)
            local: dict[str, dict[str, Any]] = {}
            if name in tables:
                for row in conn.execute(f"select * from [{name}]"):
                    local[str(row["id"])] = dict(row)
            out.missing[name] = sorted(set(upstream) - set(local), key=int)
            out.extra[name] = sorted(set(local) - set(upstream), key=int)
            stale = []
            for rid in set(upstream) & set(local):
                out.rows_compared += 1
                attrs, row = upstream[rid], local[rid]
                for key, value in attrs.items():
                    if _from_column(row.get(key), value) != _as_stored(value):
                        stale.append(rid)
                        break
            out.stale[name] = sorted(stale, key=int)
            if catalogue.TYPES[name].level == "mall":
                # A mall-scoped row's malls come only from the routes that list it ("current"
                # press releases and programs change mall lists without a new stamp; a row can
                # be listed by several malls): its memberships, and `mall_id` the lowest.
                held = _memberships(conn, tables, name)
                common = sorted(set(upstream) & set(local), key=int)
                out.stale_links[name] = []
                for rid in common:
                    malls = upstream_malls(emu, name, rid)
                    lowest = str(min(malls)) if malls else None
                    if held.get(int(rid), set()) != malls:
                        out.stale_links[name].append(f"{rid}.malls")
                    elif (
                        None if local[rid].get("mall_id") is None else str(local[rid]["mall_id"])
                    ) != lowest:
                        out.stale_links[name].append(f"{rid}.mall_id")
                out.memberships_compared += len(common)
            rels = catalogue.TYPES[name].relationships
            if rels:
                common = sorted(set(upstream) & set(local), key=int)
                out.stale_links.setdefault(name, []).extend(
                    _compare_links(conn, tables, emu, name, rels, common, local)
                )
                out.links_compared += len(common) * len(rels)
        if types is None:
            _compare_sideloads(conn, tables, emu, out)
        elif "deals" in types and "stores" in types:
            _compare_mall_deals(conn, tables, emu, out)
    finally:
        conn.close()
    return out


def referenced_sideloads(emu: Emulator, types: list[str] | None = None) -> dict[str, set[str]]:
    """Per sideloaded type, the ids some served owner (of `types`, default every listable
    type) links to, one level further too, as the include paths go (`images.tags`,
    `tags.tags`): what the mirror should hold."""
    sideloaded = [n for n, t in catalogue.TYPES.items() if not t.listable]
    direct: dict[str, set[str]] = {n: set() for n in sideloaded}
    for name in types or catalogue.LISTABLE:
        rels = [r for r in catalogue.TYPES[name].relationships if r.target in direct]
        if not rels:
            continue
        for rid in emu.snapshot(name):
            served = emu.resource(name, rid, include=[r.name for r in rels])["relationships"]
            for rel in rels:
                for d in served.get(rel.name, {}).get("data") or []:
                    direct[rel.target].add(str(d["id"]))
    # One level further, as the include paths go (`images.tags`, `tags.tags`).
    referenced = {n: set(ids) for n, ids in direct.items()}
    for name in sideloaded:
        snap = emu.snapshot(name)
        rels = catalogue.TYPES[name].relationships
        for rid in direct[name] & set(snap):
            served = emu.resource(name, rid, include=[r.name for r in rels]).get(
                "relationships", {}
            )
            for rel in rels:
                for d in served.get(rel.name, {}).get("data") or []:
                    referenced[rel.target].add(str(d["id"]))
    return referenced


def _compare_sideloads(
    conn: sqlite3.Connection, tables: set[str], emu: Emulator, out: Comparison
) -> None:
    """Images, tags and groups: the mirror holds exactly those some served owner links to,
    with the values the upstream serves now (they have no listing of their own)."""
    sideloaded = [n for n, t in catalogue.TYPES.items() if not t.listable]
    referenced = referenced_sideloads(emu)
    for name in sideloaded:
        upstream = emu.snapshot(name)
        want = {i for i in referenced[name] if i in upstream}
        local: dict[str, dict[str, Any]] = {}
        if name in tables:
            local = {str(r["id"]): dict(r) for r in conn.execute(f"select * from [{name}]")}
        out.missing[name] = sorted(want - set(local), key=int)
        out.extra[name] = sorted(set(local) - want, key=int)
        stale = []
        for rid in want & set(local):
            out.sideloads_compared += 1
            if any(
                _from_column(local[rid].get(k), v) != _as_stored(v)
                for k, v in upstream[rid].items()
            ):
                stale.append(rid)
        out.stale[name] = sorted(stale, key=int)
        rels = catalogue.TYPES[name].relationships
        if rels:
            common = sorted(want & set(local), key=int)
            out.stale_links[name] = _compare_links(conn, tables, emu, name, rels, common, local)
            out.links_compared += len(common) * len(rels)
    _compare_mall_deals(conn, tables, emu, out)


def _compare_mall_deals(
    conn: sqlite3.Connection, tables: set[str], emu: Emulator, out: Comparison
) -> None:
    """`malls_deals` (the derived view, or the table filled from the routes) against
    `GET /malls/{id}/deals` with its default visibility (Public)."""
    names = {r[0] for r in conn.execute("select name from sqlite_master")}
    have: dict[str, set[int]] = {}
    if "malls_deals" in names:
        for m, d in conn.execute("select malls_id, deals_id from malls_deals"):
            have.setdefault(str(m), set()).add(int(d))
    stale = []
    for mall in emu.snapshot("malls"):
        out.links_compared += 1
        listed = {int(i) for i in emu.ids("deals", mall_id=mall, visibility="Public")}
        if listed != have.get(mall, set()):
            stale.append(mall)
    out.stale_links["malls_deals"] = stale


def _compare_links(
    conn: sqlite3.Connection,
    tables: set[str],
    emu: Emulator,
    name: str,
    rels: tuple[catalogue.Relationship, ...],
    ids: list[str],
    local: dict[str, dict[str, Any]],
) -> list[str]:
    """Rows of `name` whose relationships (to-one columns, link tables in order) differ."""
    linked: dict[str, dict[str, list[int]]] = {}
    for rel in rels:
        if rel.to_one:
            continue
        table = rel.link_table(name)
        owner, other = rel.link_columns(name)
        per: dict[str, list[int]] = {}
        if table in tables:
            for o, t in conn.execute(
                f"select [{owner}], [{other}] from [{table}] order by [{owner}], position"
            ):
                per.setdefault(str(o), []).append(int(t))
        linked[rel.name] = per
    stale: list[str] = []
    for rid in ids:
        served = emu.resource(name, rid, include=[r.name for r in rels])["relationships"]
        for rel in rels:
            data = served.get(rel.name, {}).get("data")
            if rel.to_one:
                want = None if data is None else int(data["id"])
                have = local[rid].get(rel.column)
                ok = (None if have is None else int(have)) == want
            else:
                ok = [int(d["id"]) for d in data or []] == linked[rel.name].get(rid, [])
            if not ok:
                stale.append(f"{rid}.{rel.name}")
                break
    return stale
