"""The backfill's page write, done inside SQLite from the page's JSON text.

Why: building Python objects for a listing page is most of what a backfill costs. A page of 100
resources with their relationship links and sideloaded rows is ~500 KB of JSON; `orjson.loads`
takes ~6 ms to turn it into dicts, SQLite's JSON parser ~0.6 ms to walk it. So the backfill hands
SQLite the page text once: `json_each` splits it into one staged row per resource, and a few
set-based statements upsert the rows (`json_extract` per column), their link tables and the
included resources, with the same rules as `Mirror.write_page` (the `updated_at` guard,
tombstones, new attributes adding columns, booleans 0/1, objects and arrays as JSON text,
`meta_<key>` and to-one `<name>_id` columns, `mall_id`), the page's checkpoint in the same
transaction. Python touches the page only for the handful of values it needs (`links.last`,
`meta.scripts`, the attribute names of each type).

`Mirror.write_page` stays the path for everything else (polls, webhook fetches, reconcile): they
write a few rows at a time, and tests hold the two paths to the same result.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from sync import catalogue
from sync.catalogue import Relationship, ResourceType
from sync.channel.pages import last_page_number
from sync.errors import BadResponseError
from sync.store.bookkeeping import PageCheckpoint

if TYPE_CHECKING:
    from sync.store.mirror import Mirror

STAGE = "temp._sync_raw"

# An id as the mirror keys it: a JSON integer, or a string of 1-18 digits (else NULL: skipped).
_INT = (
    "(CASE json_type({doc}, {path}) WHEN 'integer' THEN json_extract({doc}, {path}) "
    "WHEN 'text' THEN (CASE WHEN length(json_extract({doc}, {path})) BETWEEN 1 AND 18 "
    "AND json_extract({doc}, {path}) NOT GLOB '*[^0-9]*' "
    "THEN CAST(json_extract({doc}, {path}) AS INTEGER) END) END)"
)


def _int_at(doc: str, path: str) -> str:
    return _INT.format(doc=doc, path=path)


_VALUE_ID = _int_at("value", "'$.id'")


def _lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _path(*keys: str) -> str:
    """A JSON path literal for nested object keys, each quoted."""
    return _lit("$" + "".join(f'."{k}"' for k in keys))


@dataclass(frozen=True)
class RawPageInfo:
    """What the backfill needs to know of a page it has not parsed."""

    served: int  # elements of `data`
    last: int  # page[number] of links.last (1 when absent)
    has_included: bool = False
    scripts: str | None = None  # meta.scripts as JSON text, when an array


@dataclass(frozen=True)
class RawWriteResult:
    """What one `write_raw_page` wrote."""

    info: RawPageInfo
    rows: int
    included: int
    skipped_deleted: int = 0


@dataclass
class _Batch:
    """One type's rows in the staged page: kind 0 = `data`, 1 = `included`."""

    rtype: ResourceType
    kind: int
    attrs: list[str]
    metas: list[str]
    to_one: list[Relationship]
    to_many: list[Relationship]
    samples: dict[str, Any]


def raw_page_info(m: Mirror, text: str, url: str, status: int) -> RawPageInfo:
    """Check that `text` is a JSON:API collection; its size and `links.last`."""
    try:
        if not text:
            raise sqlite3.OperationalError("empty body")
        row = m.conn.execute(
            "SELECT json_type(?1, '$.data'), json_array_length(?1, '$.data'), "
            "json_type(?1, '$.links.last'), json_extract(?1, '$.links.last'), "
            "json_extract(?1, '$.links.last.href'), json_type(?1, '$.included') = 'array', "
            "CASE WHEN json_type(?1, '$.meta.scripts') = 'array' "
            "THEN json_extract(?1, '$.meta.scripts') END",
            (text,),
        ).fetchone()
    except sqlite3.OperationalError:  # malformed JSON (SQLite parses it here, once)
        raise BadResponseError(
            "the upstream sent a body that is not JSON",
            url=url,
            status=status,
            hint="a truncated or proxied response; it will be retried on the next run",
        ) from None
    data_type, served, last_type, last, href, has_included, scripts = row
    if data_type != "array":
        raise BadResponseError(
            "the upstream sent a document without a `data` list",
            url=url,
            status=status,
            hint="not a JSON:API collection; check base_url",
        )
    link = href if last_type == "object" else last
    return RawPageInfo(
        int(served), last_page_number({"links": {"last": link}}), bool(has_included), scripts
    )


def write_raw_page(
    m: Mirror,
    rtype: ResourceType,
    text: str,
    *,
    url: str,
    status: int,
    mall_id: int | None = None,
    number: int,
    scope_key: str,
) -> RawWriteResult:
    """Upsert one page from its JSON text, with its checkpoint, in one transaction."""
    info = raw_page_info(m, text, url, status)
    conn = m.conn
    conn.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {STAGE.split('.', 1)[1]} "
        "(n INTEGER PRIMARY KEY, kind INTEGER, type TEXT, id INTEGER, doc TEXT)"
    )
    conn.execute(f"DELETE FROM {STAGE}")
    _stage_raw(m, text, rtype, info.has_included, url, status)
    batches = _raw_batches(m, rtype, mall_id)
    # Schema changes first: sqlite-utils commits on its own, so never inside our transaction.
    for b in batches:
        known = m.schema.columns(b.rtype.table)
        wanted = {"id", *b.samples}
        if not known or not {c.lower() for c in wanted} <= {c.lower() for c in known}:
            m.schema.ensure_content(b.rtype.table, {"id": 1, **b.samples})
        for rel in b.to_many:
            m.schema.ensure_link(rel.link_table(b.rtype.name), *rel.link_columns(b.rtype.name))
    m._ensure_group()
    conn.execute("SAVEPOINT sync_tx")
    try:
        dropped = _raw_drop_tombstoned(m, rtype)
        rows = included = 0
        for b in batches:
            written = _raw_upsert(m, b, mall_id)
            _raw_links(m, b)
            if b.kind == 0:
                rows += written
            else:
                included += written
        if info.scripts:
            m._write_scripts(orjson.loads(info.scripts))
        m._record_checkpoint(PageCheckpoint(rtype.name, scope_key, number, info.last))
        conn.execute("RELEASE sync_tx")
    except BaseException:
        conn.execute("ROLLBACK TO sync_tx")
        conn.execute("RELEASE sync_tx")
        raise
    m._grouped()
    return RawWriteResult(info, rows, included, dropped)


# -- staging -------------------------------------------------------------------------------


def _stage_raw(
    m: Mirror, text: str, rtype: ResourceType, included: bool, url: str, status: int
) -> None:
    """One staged row per resource of `data` (kind 0) and of `included` (kind 1)."""
    conn = m.conn
    conn.execute(
        f"INSERT INTO {STAGE} (kind, type, id, doc) "
        f"SELECT 0, ?2, {_VALUE_ID}, "
        "CASE WHEN type = 'object' THEN value END FROM json_each(?1, '$.data') "
        "UNION ALL "
        f"SELECT 1, json_extract(value, '$.type'), {_VALUE_ID}, value "
        "FROM json_each(?1, '$.included') WHERE ?3 AND type = 'object'",
        (text, rtype.name, included),
    )
    # The same checks as the parsed path (`channel.pages.to_page`), set-based.
    problem = conn.execute(
        f"SELECT kind, CASE "
        "WHEN doc IS NULL OR json_type(doc, '$.id') IS NULL THEN 'has no id' "
        "WHEN json_type(doc, '$.id') NOT IN ('integer', 'text') "
        "THEN 'has an id that is neither a string nor a number' "
        "WHEN json_type(doc, '$.attributes') NOT IN ('object', 'null') "
        "THEN 'has `attributes` that is not an object' "
        "WHEN json_type(doc, '$.meta') NOT IN ('object', 'null') "
        "THEN 'has `meta` that is not an object' "
        "WHEN json_type(doc, '$.relationships') NOT IN ('object', 'null') "
        "THEN 'has `relationships` that is not an object' "
        "WHEN EXISTS (SELECT 1 FROM json_each(doc, '$.relationships') r "
        "WHERE r.type NOT IN ('object', 'null')) "
        "THEN 'has a relationship that is not an object' END AS why "
        f"FROM {STAGE} WHERE why IS NOT NULL LIMIT 1"
    ).fetchone()
    if problem is not None:
        where = "data" if problem[0] == 0 else "included"
        raise BadResponseError(
            f"a resource in `{where}` {problem[1]}",
            url=url,
            status=status,
            hint="off-spec page; it will be retried on the next run",
        )


def _raw_batches(m: Mirror, rtype: ResourceType, mall_id: int | None) -> list[_Batch]:
    """Per staged type: its attribute and meta names, relationships present, new columns."""
    conn = m.conn
    names: dict[tuple[int, str], list[tuple[str, str]]] = {}
    for kind, type_name, where, key, _first, _node in conn.execute(
        "SELECT s.kind, s.type, 'a', j.key, min(s.n) AS first, min(j.id) AS node "
        f"FROM {STAGE} s, json_each(s.doc, '$.attributes') j WHERE s.id IS NOT NULL "
        "GROUP BY s.kind, s.type, j.key "
        "UNION ALL "
        "SELECT s.kind, s.type, 'm', j.key, min(s.n), min(j.id) "
        f"FROM {STAGE} s, json_each(s.doc, '$.meta') j WHERE s.id IS NOT NULL "
        "GROUP BY s.kind, s.type, j.key ORDER BY 1, 2, 5, 6"
    ).fetchall():
        names.setdefault((kind, type_name), []).append((where, key))
    for kind, type_name in conn.execute(
        f"SELECT DISTINCT kind, type FROM {STAGE} WHERE id IS NOT NULL AND type IS NOT NULL"
    ).fetchall():
        names.setdefault((kind, type_name), [])
    batches = []
    for (kind, type_name), keys in sorted(names.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        t = (
            rtype
            if kind == 0
            else catalogue.TYPES.get(type_name)
            if isinstance(type_name, str)
            else None
        )
        if t is None:
            continue  # an included type the mirror does not keep
        batches.append(
            _raw_batch(m, t, kind, keys, mall_id if kind == 0 and t.scope == "mall" else None)
        )
    return batches


def _raw_batch(
    m: Mirror,
    t: ResourceType,
    kind: int,
    keys: list[tuple[str, str]],
    mall_id: int | None,
) -> _Batch:
    from sync.store.mirror import _SAFE_NAME  # one rule for column names, both paths

    present = _raw_relationships_present(m, t, kind)
    to_one = [r for r in t.relationships if r.to_one and present.get(r.name)]
    to_many = [r for r in t.relationships if not r.to_one and present.get(r.name) == "array"]
    extra = ["mall_id"] if mall_id is not None else []
    # Columns the mirror sets itself win over attributes of the same name (as in write_page).
    taken: set[str] = {"id", *(c.lower() for c in extra), *(r.column.lower() for r in to_one)}
    attrs: list[str] = []
    metas: list[str] = []
    for where, key in keys:
        column = key if where == "a" else f"meta_{key}"
        if not _SAFE_NAME(column) or column.lower() in taken:
            continue  # SQLite names are case-insensitive: the first spelling wins
        taken.add(column.lower())
        (attrs if where == "a" else metas).append(key)
    known = {c.lower() for c in m.schema.columns(t.table)}
    samples: dict[str, Any] = {}
    for where, key in [("a", k) for k in attrs] + [("m", k) for k in metas]:
        column = key if where == "a" else f"meta_{key}"
        samples[column] = (
            _raw_sample(m, t.name, kind, ("attributes" if where == "a" else "meta", key))
            if column.lower() not in known
            else None
        )
    for rel in to_one:
        samples[rel.column] = 1
    for column in extra:
        samples[column] = mall_id
    return _Batch(t, kind, attrs, metas, to_one, to_many, samples)


def _raw_relationships_present(m: Mirror, t: ResourceType, kind: int) -> dict[str, str]:
    """For each relationship of `t`: 'array' when some row has its data as an array,
    'other' when some row has data of another shape (null or an object), absent if none."""
    if not t.relationships:
        return {}
    cols = ", ".join(
        f"max(json_type(doc, {_path('relationships', r.name, 'data')}) = 'array'), "
        f"max(json_type(doc, {_path('relationships', r.name, 'data')}) IS NOT NULL)"
        for r in t.relationships
    )
    row = m.conn.execute(
        f"SELECT {cols} FROM {STAGE} WHERE kind = ? AND type = ? AND id IS NOT NULL",
        (kind, t.name),
    ).fetchone()
    out: dict[str, str] = {}
    for i, rel in enumerate(t.relationships):
        if row[2 * i]:
            out[rel.name] = "array"
        elif row[2 * i + 1]:
            out[rel.name] = "other"
    return out


def _raw_sample(m: Mirror, type_name: str, kind: int, keys: tuple[str, str]) -> Any:
    """The first non-null value of a new column (it decides the column's type)."""
    path = _path(*keys)
    row = m.conn.execute(
        f"SELECT json_extract(doc, {path}) FROM {STAGE} WHERE kind = ? AND type = ? "
        f"AND id IS NOT NULL AND json_type(doc, {path}) NOT IN ('null') ORDER BY n LIMIT 1",
        (kind, type_name),
    ).fetchone()
    return None if row is None else row[0]


# -- writes --------------------------------------------------------------------------------


def _raw_drop_tombstoned(m: Mirror, rtype: ResourceType) -> int:
    """Forget staged rows of ids deleted earlier (a page fetched before a deletion)."""
    if m._tombstones is None:
        m._tombstones = bool(m.conn.execute("SELECT 1 FROM _sync_tombstones LIMIT 1").fetchone())
    if not m._tombstones:
        return 0
    dropped = m.conn.execute(
        f"SELECT count(*) FROM {STAGE} s WHERE s.kind = 0 AND EXISTS (SELECT 1 FROM "
        "_sync_tombstones t WHERE t.type = ? AND t.id = s.id)",
        (rtype.name,),
    ).fetchone()[0]
    m.conn.execute(
        f"DELETE FROM {STAGE} WHERE EXISTS (SELECT 1 FROM _sync_tombstones t "
        f"WHERE t.type = (CASE {STAGE}.kind WHEN 0 THEN ? ELSE {STAGE}.type END) "
        f"AND t.id = {STAGE}.id)",
        (rtype.name,),
    )
    return int(dropped)


def _raw_upsert(m: Mirror, b: _Batch, mall_id: int | None) -> int:
    t = b.rtype.table
    cols: list[str] = []
    values: list[str] = []
    for key in b.attrs:
        cols.append(key)
        values.append(f"json_extract(s.doc, {_path('attributes', key)})")
    for key in b.metas:
        cols.append(f"meta_{key}")
        values.append(f"json_extract(s.doc, {_path('meta', key)})")
    for rel in b.to_one:
        cols.append(rel.column)
        values.append(_int_at("s.doc", _path("relationships", rel.name, "data", "id")))
    params: list[Any] = [b.kind, b.rtype.name]
    if "mall_id" in b.samples and b.kind == 0 and mall_id is not None:
        cols.append("mall_id")
        values.append("?3")
        params.append(mall_id)
    where = "s.kind = ?1 AND s.type = ?2 AND s.id IS NOT NULL"
    stamped = "updated_at" in b.attrs
    if b.kind == 1 and stamped and "updated_at" in m.schema.columns(t):
        # Included rows repeat page after page: skip the very copy already stored.
        where += (
            f" AND NOT EXISTS (SELECT 1 FROM [{t}] o WHERE o.id = s.id AND o.updated_at = "
            "json_extract(s.doc, '$.attributes.updated_at'))"
        )
    names = ", ".join(f"[{c}]" for c in ("id", *cols))
    sets = ", ".join(f"[{c}] = excluded.[{c}]" for c in cols)
    sql = f"INSERT INTO [{t}] ({names}) SELECT {', '.join(['s.id', *values])} "
    sql += f"FROM {STAGE} s WHERE {where} ORDER BY s.n"
    sql += f" ON CONFLICT(id) DO UPDATE SET {sets}" if sets else " ON CONFLICT(id) DO NOTHING"
    if stamped and sets:
        sql += f" WHERE [{t}].updated_at IS NULL OR excluded.updated_at >= [{t}].updated_at"
    cur = m.conn.execute(sql, params)
    if b.kind == 1:
        return max(cur.rowcount, 0)
    return int(
        m.conn.execute(
            f"SELECT count(*) FROM {STAGE} WHERE kind = 0 AND id IS NOT NULL"
        ).fetchone()[0]
    )


def _raw_links(m: Mirror, b: _Batch) -> None:
    """Each to-many relationship present as an array: the owner's links replaced, in order."""
    for rel in b.to_many:
        table = rel.link_table(b.rtype.name)
        owner, other = rel.link_columns(b.rtype.name)
        data = _path("relationships", rel.name, "data")
        owners = (
            f"SELECT id FROM {STAGE} WHERE kind = ?1 AND type = ?2 AND id IS NOT NULL "
            f"AND json_type(doc, {data}) = 'array'"
        )
        m.conn.execute(
            f"DELETE FROM [{table}] WHERE [{owner}] IN ({owners})", (b.kind, b.rtype.name)
        )
        related = _int_at("j.value", "'$.id'")
        m.conn.execute(
            f"INSERT OR IGNORE INTO [{table}] ([{owner}], [{other}], position) "
            "SELECT id, r, row_number() OVER (PARTITION BY n ORDER BY k) - 1 FROM ("
            f"SELECT s.n AS n, s.id AS id, j.key AS k, {related} AS r "
            f"FROM {STAGE} s, json_each(s.doc, {data}) j "
            "WHERE s.kind = ?1 AND s.type = ?2 AND s.id IS NOT NULL "
            f"AND json_type(s.doc, {data}) = 'array' AND j.type = 'object'"
            ") WHERE r IS NOT NULL",
            (b.kind, b.rtype.name),
        )


__all__ = ["RawPageInfo", "RawWriteResult", "raw_page_info", "write_raw_page"]
