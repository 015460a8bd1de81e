"""Mall memberships: which malls list a mall-scoped row, as a relation (`malls_<type>`).

The spec lists stores, products, programs, social feeds and press releases only under
`/malls/{id}/<type>`, and never says a row belongs to one mall: a product sold in three malls is
listed by three mall routes, and a store can move from one mall to another without a new
`updated_at`. So a mall-scoped row's malls are a table per type, `malls_<type>` (`malls_id`,
`<type>_id`, shaped as a link table of the malls' relationship of that name), kept by every
path that reads a mall route: the backfill's and the polls' page writes add the pair of the
mall that listed the row, the reconcile adds what a mall's listing names and removes what it
no longer names (once `filter[id]` in that mall agrees), and a mall's deletion removes its pairs.

Absent from one mall's listing is a change of membership, never a deletion: a row leaves the
mirror only when the deletions feed lists it, or when no mall lists it any more and `filter[id]`
finds it in no mall (`orphans`, confirmed by `sync.jobs.proving.reconcile`).

The row's `mall_id` column stays as a convenience for readers: the lowest-numbered mall that
lists it (NULL when none does), kept in step with the table here, so it never names a mall the
table does not hold.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from sync.model import catalogue
from sync.store import changes

if TYPE_CHECKING:
    from sync.store.schema import Schema

#: Types whose rows belong to malls by the routes that list them.
MEMBER_TYPES: tuple[str, ...] = tuple(n for n, t in catalogue.TYPES.items() if t.level == "mall")
#: Top-level types whose malls may be known from `/malls/{id}/<type>` (`sync.jobs.malls.mallroutes`):
#: `malls_contacts` (also the malls' `contacts` linkage) and `malls_deals` (when a table).
ROUTED_TABLES = ("malls_contacts", "malls_deals")


def table(type_name: str) -> str:
    """The membership table of a mall-scoped type."""
    return f"malls_{type_name}"


def columns(type_name: str) -> tuple[str, str]:
    """(mall column, row column) of the membership table."""
    return "malls_id", f"{type_name}_id"


def ensure(schema: Schema, type_name: str) -> None:
    """The membership table of a mall-scoped type, shaped as the malls' link table."""
    made = not schema.columns(table(type_name))
    schema.ensure_link(table(type_name), *columns(type_name), "malls", type_name)
    if made and not schema.defer_indexes:  # a bulk load makes the feed's triggers at its end
        changes.create_membership_triggers(schema.conn, type_name)


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
    )


def _has_mall_id(conn: sqlite3.Connection, type_name: str) -> bool:
    return any(r[1] == "mall_id" for r in conn.execute(f"PRAGMA table_info([{type_name}])"))


def add(conn: sqlite3.Connection, type_name: str, pairs: Iterable[tuple[int, int]]) -> None:
    """Record (mall, row id) pairs (inside the caller's transaction)."""
    mall, row = columns(type_name)
    conn.executemany(
        f"INSERT OR IGNORE INTO [{table(type_name)}] ([{mall}], [{row}], position) "
        "VALUES (?, ?, 0)",
        pairs,
    )


def remove(conn: sqlite3.Connection, type_name: str, mall_id: int, ids: Sequence[int]) -> int:
    """Remove the pairs of `ids` in `mall_id`; re-point their `mall_id`. Returns pairs removed."""
    if not ids or not _exists(conn, table(type_name)):
        return 0
    mall, row = columns(type_name)
    n = 0
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        n += conn.execute(
            f"DELETE FROM [{table(type_name)}] WHERE [{mall}] = ? AND [{row}] IN ({marks})",
            (mall_id, *chunk),
        ).rowcount
        refresh_mall_id(conn, type_name, chunk)
    return n


def refresh_mall_id(conn: sqlite3.Connection, type_name: str, ids: Sequence[int]) -> None:
    """Set `mall_id` of `ids` to the lowest mall the table holds for each (NULL for none)."""
    if not ids or not _has_mall_id(conn, type_name):
        return
    mall, row = columns(type_name)
    marks = ",".join("?" * len(ids))
    conn.execute(
        f"UPDATE [{type_name}] SET mall_id = (SELECT min([{mall}]) FROM [{table(type_name)}] m "
        f"WHERE m.[{row}] = [{type_name}].id) WHERE id IN ({marks})",
        list(ids),
    )


def drop_mall(conn: sqlite3.Connection, mall_id: int) -> dict[str, list[int]]:
    """A mall is gone: remove its pairs in every membership table, its hours and current hours.
    Returns, per type, the rows that lost a mall (candidates for `orphans`)."""
    out: dict[str, list[int]] = {}
    for name in MEMBER_TYPES:
        if not _exists(conn, table(name)):
            continue
        mall, row = columns(name)
        ids = [
            int(r[0])
            for r in conn.execute(
                f"SELECT [{row}] FROM [{table(name)}] WHERE [{mall}] = ?", (mall_id,)
            )
        ]
        if ids:
            conn.execute(f"DELETE FROM [{table(name)}] WHERE [{mall}] = ?", (mall_id,))
            for start in range(0, len(ids), 500):
                refresh_mall_id(conn, name, ids[start : start + 500])
            out[name] = ids
    for routed in ROUTED_TABLES:  # contacts and deals known from the mall routes
        if _exists(conn, routed):
            conn.execute(f"DELETE FROM [{routed}] WHERE malls_id = ?", (mall_id,))
    for hours in (catalogue.HOURS_TABLE, catalogue.CURRENT_HOURS_TABLE):
        if _exists(conn, hours):
            conn.execute(f"DELETE FROM [{hours}] WHERE mall_id = ?", (mall_id,))
    return out


def drop_rows(conn: sqlite3.Connection, type_name: str, ids: Sequence[int]) -> None:
    """Rows deleted: their pairs go (memberships, and the mall-route tables of contacts and
    deals)."""
    marks = ",".join("?" * len(ids))
    for name in (table(type_name),):
        if _exists(conn, name):
            conn.execute(f"DELETE FROM [{name}] WHERE [{type_name}_id] IN ({marks})", list(ids))


def malls_referenced(conn: sqlite3.Connection) -> set[int]:
    """Every mall some membership table still names (a mall deleted upstream stays here until
    a reconcile visits it and finds it gone)."""
    out: set[int] = set()
    for name in MEMBER_TYPES:
        if _exists(conn, table(name)):
            mall, _ = columns(name)
            out.update(
                int(r[0]) for r in conn.execute(f"SELECT DISTINCT [{mall}] FROM [{table(name)}]")
            )
    return out


def _keyset(
    conn: sqlite3.Connection, sql: str, params: tuple[int, ...], start: int, batch: int
) -> Iterator[list[int]]:
    """Batches of the ids `sql` selects after the last one yielded (`sql` takes `params`, then
    the last id, then the batch size), each read whole before it is yielded."""
    last = start
    while True:
        ids = [int(r[0]) for r in conn.execute(sql, (*params, last, batch))]
        if ids:
            yield ids
        if len(ids) < batch:
            return
        last = ids[-1]


def orphans(conn: sqlite3.Connection, type_name: str, batch: int = 100) -> Iterator[list[int]]:
    """Batches of rows of `type_name` that no mall lists (each batch read whole first)."""
    if not _exists(conn, type_name) or not _exists(conn, table(type_name)):
        return
    _, row = columns(type_name)
    sql = (
        f"SELECT id FROM [{type_name}] t WHERE NOT EXISTS (SELECT 1 FROM [{table(type_name)}] m "
        f"WHERE m.[{row}] = t.id) AND id > ? ORDER BY id LIMIT ?"
    )
    yield from _keyset(conn, sql, (), -(1 << 63), batch)


def ids_in_mall(
    conn: sqlite3.Connection, type_name: str, mall_id: int, after: int | None = None
) -> Iterator[int]:
    """Ids the table holds for `mall_id`, in order (those greater than `after`), streamed."""
    if not _exists(conn, table(type_name)):
        return
    mall, row = columns(type_name)
    sql = (
        f"SELECT [{row}] FROM [{table(type_name)}] WHERE [{mall}] = ? AND [{row}] > ? "
        f"ORDER BY [{row}] LIMIT ?"
    )
    for chunk in _keyset(conn, sql, (mall_id,), -(1 << 63) if after is None else after, 1000):
        yield from chunk


def malls_of(conn: sqlite3.Connection, type_name: str, rid: int) -> list[int]:
    """The malls the table holds for one row, ascending."""
    if not _exists(conn, table(type_name)):
        return []
    mall, row = columns(type_name)
    return [
        int(r[0])
        for r in conn.execute(
            f"SELECT [{mall}] FROM [{table(type_name)}] WHERE [{row}] = ? ORDER BY 1", (rid,)
        )
    ]


def count_in_mall(conn: sqlite3.Connection, type_name: str, mall_id: int) -> int:
    if not _exists(conn, table(type_name)):
        return 0
    mall, _ = columns(type_name)
    return int(
        conn.execute(
            f"SELECT count(*) FROM [{table(type_name)}] WHERE [{mall}] = ?", (mall_id,)
        ).fetchone()[0]
    )


def busiest(conn: sqlite3.Connection, type_name: str, n: int) -> list[int]:
    """The `n` malls whose rows of `type_name` changed last (the newest `updated_at` of a row
    they list first): where a new row of the type most likely is."""
    if n <= 0 or not _exists(conn, table(type_name)):
        return []
    mall, row = columns(type_name)
    return [
        int(r[0])
        for r in conn.execute(
            f"SELECT m.[{mall}] FROM [{table(type_name)}] m JOIN [{type_name}] t "
            f"ON t.id = m.[{row}] GROUP BY m.[{mall}] ORDER BY max(t.updated_at) DESC LIMIT ?",
            (n,),
        )
    ]


def migrate(conn: sqlite3.Connection, create: Callable[[str], None]) -> None:
    """A mirror written before memberships: each row's `mall_id` becomes its first pair.

    `create(type_name)` makes the (empty) membership table (the schema's link-table DDL)."""
    for name in MEMBER_TYPES:
        if not _exists(conn, name) or _exists(conn, table(name)) or not _has_mall_id(conn, name):
            continue
        create(name)
        mall, row = columns(name)
        conn.execute(
            f"INSERT OR IGNORE INTO [{table(name)}] ([{mall}], [{row}], position) "
            f"SELECT mall_id, id, 0 FROM [{name}] WHERE mall_id IS NOT NULL"
        )
