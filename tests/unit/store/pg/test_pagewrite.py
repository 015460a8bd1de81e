"""`sync.store.pg.pagewrite`: the guarded page write (one `INSERT ... ON CONFLICT` over a page
bound as arrays), against a real PostgreSQL.

Every test writes into a fresh database (`pg_db`) on the private server the suite starts
(`tests.support.postgres`): a newer stamp is written, an older one refused, an unchanged
rewrite leaves the row's version (`xmin`) and the table's dead tuples as they were, an equal
stamp with new content is written, columns are added and typed from the spec, and the server
itself runs as an unprivileged user when the tests run as root. Groups of pages are
`test_bulk.py`'s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sync.pipeline.batches import Staged
from sync.store.pg.columns import (
    json_value,
)
from sync.store.pg.pagewrite import PageWriter
from sync.store.pg.upsert import upsert_sql
from tests.support.paths import ROOT
from tests.support.postgres import ENV_DSN, SERVER_USER
from tests.support.store_units import staged

SCHEMA = "ccsync"
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"


def _deal(rid: int, updated: str | None, title: str, **attrs: Any) -> dict[str, Any]:
    stamp = {} if updated is None else {"updated_at": updated}
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": title, **stamp, **attrs},
    }


def _deals(*resources: dict[str, Any]) -> Staged:
    return staged("deals", list(resources))[0]


def _rows(conn: psycopg.Connection[Any], table: str, cols: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT id, {} FROM {} ORDER BY id").format(
        sql.SQL(cols), sql.Identifier(SCHEMA, table)
    )
    return [tuple(r) for r in conn.execute(query).fetchall()]


def _versions(conn: psycopg.Connection[Any], table: str) -> dict[int, str]:
    """Each row's `xmin`: the transaction that wrote its current version."""
    query = sql.SQL("SELECT id, xmin::text FROM {}").format(sql.Identifier(SCHEMA, table))
    return {rid: xmin for rid, xmin in conn.execute(query).fetchall()}


def _tuple_stats(conn: psycopg.Connection[Any], table: str) -> tuple[int, int]:
    """(updates, dead tuples) of `table` counted by the server, flushed from this backend."""
    conn.execute("SELECT pg_stat_force_next_flush()")  # PostgreSQL 15+: no 0.5 s stats delay
    row = conn.execute(
        "SELECT n_tup_upd, n_dead_tup FROM pg_stat_user_tables"
        " WHERE schemaname = %s AND relname = %s",
        (SCHEMA, table),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _types(conn: psycopg.Connection[Any], table: str) -> dict[str, tuple[str, str | None]]:
    """Each column's (type, collation) as the server has it (None: the database's default)."""
    rows = conn.execute(
        "SELECT column_name, data_type, collation_name FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s",
        (SCHEMA, table),
    ).fetchall()
    return {name: (typ, coll) for name, typ, coll in rows}


def test_a_new_table_takes_its_columns_types_from_the_spec(
    conn: psycopg.Connection[Any],
) -> None:
    store = {
        "id": "3",
        "type": "stores",
        "attributes": {
            "name": "Shoes\x00R Us",
            "updated_at": T1,
            "is_featured": True,
            "retailer_id": 12,
            "distance": 2,
            "structured_hours": [{"day": "Monday", "hours": {"opens_at": "10:00"}}],
            "floors": 3,  # not in the spec: inferred from its values
            "motto": "walk on",
            "unused": None,  # all null: no column until a value comes
        },
    }
    writer = PageWriter(conn, SCHEMA)
    assert writer.write(staged("stores", [store], mall_id=7)[0]) == 1
    types = _types(conn, "stores")
    assert types == {
        "id": ("bigint", None),
        "mall_id": ("bigint", None),
        "name": ("text", None),
        "updated_at": ("text", "C"),
        "is_featured": ("boolean", None),
        "retailer_id": ("bigint", None),
        "distance": ("double precision", None),
        "structured_hours": ("jsonb", None),
        "floors": ("bigint", None),
        "motto": ("text", None),
    }
    assert _rows(conn, "stores", "name, is_featured, distance, structured_hours, mall_id") == [
        (3, "Shoes\ufffdR Us", True, 2.0, [{"day": "Monday", "hours": {"opens_at": "10:00"}}], 7)
    ]
    key = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
        " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'ccsync.stores'::regclass"
        " AND i.indisprimary"
    ).fetchall()
    assert key == [("id",)]


def test_a_newer_stamp_is_written_and_an_older_copy_refused(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    assert writer.write(_deals(_deal(1, T1, "a"), _deal(2, T1, "b"))) == 2
    assert writer.write(_deals(_deal(1, T2, "newer"))) == 1
    assert _rows(conn, "deals", "title, updated_at") == [(1, "newer", T2), (2, "b", T1)]
    before = _versions(conn, "deals")
    assert writer.write(_deals(_deal(1, T0, "older"), _deal(2, T0, "older"))) == 0
    assert _rows(conn, "deals", "title, updated_at") == [(1, "newer", T2), (2, "b", T1)]
    assert _versions(conn, "deals") == before  # refused, not rewritten


def test_an_unchanged_rewrite_leaves_every_row_version_and_no_dead_tuple(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    page = [_deal(i, T1, f"deal {i}", is_local=i % 2 == 0) for i in range(1, 51)]
    assert writer.write(_deals(*page)) == 50
    before, stats = _versions(conn, "deals"), _tuple_stats(conn, "deals")
    assert stats == (0, 0)
    assert writer.write(_deals(*page)) == 0
    assert writer.write(staged("deals", list(reversed(page)))[0]) == 0
    assert _versions(conn, "deals") == before
    assert _tuple_stats(conn, "deals") == stats  # no update, no dead tuple


def test_an_equal_stamp_with_new_content_is_written(conn: psycopg.Connection[Any]) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a"), _deal(2, T1, "b")))
    before = _versions(conn, "deals")
    assert writer.write(_deals(_deal(1, T1, "edited under the same stamp"), _deal(2, T1, "b"))) == 1
    assert _rows(conn, "deals", "title") == [(1, "edited under the same stamp"), (2, "b")]
    after = _versions(conn, "deals")
    assert after[1] != before[1] and after[2] == before[2]


def test_a_stored_row_without_a_stamp_takes_a_copy_and_a_copy_without_one_loses(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a"), _deal(2, T1, "b")))
    conn.execute("UPDATE ccsync.deals SET updated_at = NULL WHERE id = 1")
    # One batch, one column set: deal 2's copy has no stamp (NULL in the batch's column).
    assert writer.write(_deals(_deal(1, T0, "over a null"), _deal(2, None, "no stamp"))) == 1
    assert _rows(conn, "deals", "title, updated_at") == [(1, "over a null", T0), (2, "b", T1)]


def test_a_later_page_adds_its_new_columns_and_widens_inferred_ones(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    assert writer.write(_deals(_deal(2, T1, "b", rank=5, note=None))) == 1
    assert _types(conn, "deals")["rank"] == ("bigint", None)
    assert "note" not in _types(conn, "deals")  # all null so far
    writer.write(_deals(_deal(3, T1, "c", rank=2.5, note="n")))
    assert _types(conn, "deals")["rank"] == ("double precision", None)
    writer.write(_deals(_deal(4, T1, "d", rank="high")))
    assert _types(conn, "deals")["rank"] == ("text", None)
    assert _rows(conn, "deals", "title, rank, note") == [
        (1, "a", None, None),
        (2, "b", "5", None),
        (3, "c", "2.5", "n"),
        (4, "d", "high", None),
    ]
    # A declared column keeps its type whatever comes: a number in a text column is its text.
    writer.write(_deals(_deal(5, T1, 42)))
    assert _rows(conn, "deals", "title")[-1] == (5, "42")
    assert _types(conn, "deals")["title"] == ("text", None)


def test_an_attribute_that_cannot_be_a_column_is_left_out_and_its_row_kept(
    conn: psycopg.Connection[Any],
) -> None:
    long = "x" * 64
    writer = PageWriter(conn, SCHEMA)
    assert writer.write(_deals(_deal(1, T1, "a", xmin="sys", **{long: 1, "y" * 63: 2}))) == 1
    assert set(_types(conn, "deals")) == {"id", "title", "updated_at", "y" * 63}
    assert _rows(conn, "deals", "title") == [(1, "a")]


def test_a_type_without_updated_at_is_written_by_content(conn: psycopg.Connection[Any]) -> None:
    def tag(rid: int, name: str) -> dict[str, Any]:
        return {"id": str(rid), "type": "tags", "attributes": {"name": name}}

    writer = PageWriter(conn, SCHEMA)
    tags = staged("tags", [tag(1, "sale"), tag(2, "shoes")])[0]
    assert tags.columns == ("name",)
    assert writer.write(tags) == 2
    before = _versions(conn, "tags")
    assert writer.write(staged("tags", [tag(1, "sale"), tag(2, "shoes")])[0]) == 0
    assert _versions(conn, "tags") == before
    assert writer.write(staged("tags", [tag(1, "sale"), tag(2, "boots")])[0]) == 1
    assert _rows(conn, "tags", "name") == [(1, "sale"), (2, "boots")]
    assert "WHERE ROW(" in upsert_sql(SCHEMA, "tags", ("name",)).as_string(conn)


def test_a_mall_scoped_row_keeps_its_lowest_mall_without_a_rewrite(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    store = {"id": "3", "type": "stores", "attributes": {"name": "s", "updated_at": T0}}
    written = [writer.write(staged("stores", [store], mall_id=m)[0]) for m in (9, 4, 7)]
    assert written == [1, 1, 0]  # mall 7 lists it too: its lowest mall stays 4, not rewritten
    assert _rows(conn, "stores", "mall_id") == [(3, 4)]


def test_copies_of_one_id_in_a_batch_leave_the_newest(conn: psycopg.Connection[Any]) -> None:
    writer = PageWriter(conn, SCHEMA)
    batch = _deals(_deal(1, T2, "newest"), _deal(1, T1, "older"), _deal(2, T1, "b"))
    assert batch.ids == [1, 1, 2]
    assert writer.write(batch) == 2
    assert _rows(conn, "deals", "title") == [(1, "newest"), (2, "b")]


def test_a_jsonb_value_with_a_nul_is_written(conn: psycopg.Connection[Any]) -> None:
    program = {
        "id": "1",
        "type": "programs",
        "attributes": {"name": "p", "updated_at": T1, "properties": {"k": "a\x00b"}},
    }
    assert PageWriter(conn, SCHEMA).write(staged("programs", [program], mall_id=2)[0]) == 1
    assert _rows(conn, "programs", "properties") == [(1, {"k": "a\ufffdb"})]


def test_the_schema_changes_outside_the_page_transaction_and_the_rows_inside_it(
    conn: psycopg.Connection[Any],
) -> None:
    writer = PageWriter(conn, SCHEMA)
    first, second = _deals(_deal(1, T1, "a")), _deals(_deal(2, T1, "b", rank=1))
    writer.ensure(first)
    writer.ensure(second)
    with conn.transaction():  # one page transaction, two batches of one table
        assert writer.upsert(first) == 1
        assert writer.upsert(second) == 1
        with pytest.raises(RuntimeError, match="outside the page's transaction"):
            writer.ensure(_deals(_deal(3, T1, "c", other="x")))
    assert _rows(conn, "deals", "title, rank") == [(1, "a", None), (2, "b", 1)]
    with pytest.raises(RuntimeError, match="no such table"):
        writer.upsert(staged("tags", [{"id": "1", "type": "tags", "attributes": {}}])[0])


def test_a_failed_page_writes_nothing(conn: psycopg.Connection[Any]) -> None:
    writer = PageWriter(conn, SCHEMA)
    writer.write(_deals(_deal(1, T1, "a")))
    with pytest.raises(RuntimeError, match="page failed"), conn.transaction():
        writer.upsert(_deals(_deal(1, T2, "b"), _deal(2, T2, "c")))
        raise RuntimeError("page failed")
    assert _rows(conn, "deals", "title") == [(1, "a")]
    assert writer.write(_deals(_deal(2, T2, "c"))) == 1  # the connection writes on


def test_a_page_binds_every_type_as_an_array_of_it(
    conn: psycopg.Connection[Any],
) -> None:
    """Each column goes as one binary array of its type: nulls, a number in a text column, a
    NUL in one text value, booleans staged as 0/1, integers in a double column, jsonb."""
    writer = PageWriter(conn, SCHEMA)
    stores = [
        {
            "id": str(i),
            "type": "stores",
            "attributes": {
                "name": 7 if i == 2 else "nul\x00here" if i == 3 else f"store {i}",
                "updated_at": T1 if i != 4 else None,
                "is_featured": i % 2 == 0,
                "distance": 1.5 if i == 1 else i,
                "structured_hours": None if i == 1 else {"day": i},
                "motto": None,
            },
        }
        for i in range(1, 6)
    ]
    assert writer.write(staged("stores", stores, mall_id=3)[0]) == 5
    assert _rows(conn, "stores", "name, updated_at, is_featured, distance, structured_hours") == [
        (1, "store 1", T1, False, 1.5, None),
        (2, "7", T1, True, 2.0, {"day": 2}),
        (3, "nul\ufffdhere", T1, False, 3.0, {"day": 3}),
        (4, "store 4", None, True, 4.0, {"day": 4}),
        (5, "store 5", T1, False, 5.0, {"day": 5}),
    ]
    page = _deals(_deal(9, T1, "plain"), _deal(8, T1, "text"))
    writer.ensure(page)
    statement = writer.statement(page)
    assert statement is not None
    text, params = statement
    assert b"unnest(%s)" in text and len(params) == 3  # id, title, updated_at
    assert params[0].oid == 1016 and params[1].oid == 1009  # bigint[], text[]


def test_a_batch_of_ids_alone_inserts_new_rows_and_leaves_the_rest(
    conn: psycopg.Connection[Any],
) -> None:
    def tag(rid: int, **attributes: Any) -> dict[str, Any]:
        return {"id": str(rid), "type": "tags", "attributes": attributes}

    writer = PageWriter(conn, SCHEMA)
    assert writer.write(staged("tags", [tag(1, name="sale")])[0]) == 1
    bare = staged("tags", [tag(2, note=None), tag(1, note=None)])[0]
    assert bare.columns == ("note",)  # all null: no column, the batch binds its ids alone
    assert writer.write(bare) == 1
    assert _rows(conn, "tags", "name") == [(1, "sale"), (2, None)]


def test_two_writers_of_overlapping_pages_never_deadlock(pg_db: str) -> None:
    """Each writer takes its rows' keys in id order, whatever order its page lists them in: two
    page transactions over the same ids wait for each other, never deadlock."""
    ids = range(1, 301)
    with psycopg.connect(pg_db, autocommit=True) as c:
        PageWriter(c, SCHEMA).write(_deals(*(_deal(i, T0, "first") for i in ids)))
    errors: list[BaseException] = []

    def writer(order: list[int], name: str) -> None:
        try:
            with psycopg.connect(pg_db, autocommit=True) as c:
                w = PageWriter(c, SCHEMA)
                for n in range(15):
                    stamp = f"2026-02-01T00:00:{n:02d}.000Z"
                    w.write(_deals(*(_deal(i, stamp, f"{name} {n}") for i in order)))
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(list(ids), "up")),
        threading.Thread(target=writer, args=(list(reversed(ids)), "down")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    with psycopg.connect(pg_db) as c:
        stamps = c.execute("SELECT DISTINCT updated_at FROM ccsync.deals").fetchall()
    assert stamps == [("2026-02-01T00:00:14.000Z",)]


def test_the_upsert_takes_keys_in_id_order_under_the_guard(
    conn: psycopg.Connection[Any],
) -> None:
    text = upsert_sql(SCHEMA, "deals", ("title", "updated_at")).as_string(conn)
    assert "ORDER BY id ON CONFLICT (id) DO UPDATE SET" in text
    assert 'EXCLUDED."updated_at" > "t"."updated_at"' in text
    assert "IS DISTINCT FROM" in text
    assert upsert_sql(SCHEMA, "deals", ()).as_string(conn).endswith("ON CONFLICT (id) DO NOTHING")


def test_the_private_server_runs_as_an_unprivileged_user(pg_dsn: str) -> None:
    """As root (CI), the server the fixture started runs as `postgres`, its files owned by it."""
    if os.environ.get(ENV_DSN):
        return  # a server given by DSN: not one this suite started, nor on this machine perhaps
    with psycopg.connect(pg_dsn) as c:
        row = c.execute("SELECT current_setting('data_directory'), pg_backend_pid()").fetchone()
        assert row is not None
        data, pid = Path(row[0]), int(row[1])
        # The backend serving this connection: real and effective uid.
        uids = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[:2]
    owner = data.stat().st_uid
    if os.geteuid() == 0:
        import pwd

        expected = pwd.getpwnam(SERVER_USER).pw_uid
        assert owner == expected != 0
        assert [int(u) for u in uids] == [expected, expected]
    else:
        assert owner == os.geteuid()


def test_sync_imports_psycopg_only_in_its_postgres_store() -> None:
    """An SQLite user loads none of psycopg: every module but `sync.store.pg`'s imports
    without it."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "sync").rglob("*.py")
        if "pg" not in p.relative_to(ROOT / "sync").parts
    )
    assert "sync.store.pagewrite" in modules and "sync.cli" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'psycopg'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_json_text_of_any_value_is_kept_as_that_value(conn: psycopg.Connection[Any]) -> None:
    """`json_value` (what SQLite keeps as JSON text: press releases, current hours): the JSON
    null and scalars as themselves, NUL in a string or key replaced."""
    for text, value in (
        ('{"a":[1,"b"]}', {"a": [1, "b"]}),
        ("null", None),
        ('"s"', "s"),
        ("7", 7),
        ('{"k\\u0000":"v\\u0000"}', {"k\ufffd": "v\ufffd"}),
        ('"\\\\u0000"', "\\u0000"),  # an escaped backslash, not a NUL
    ):
        assert conn.execute("SELECT %s::jsonb", (json_value(text),)).fetchone() == (value,), text


def test_owners_new_to_a_table_this_writer_made_are_not_asked_and_the_others_guarded(
    conn: psycopg.Connection[Any],
) -> None:
    """A writer that made a table knows the ids it never wrote there have no row and no links
    (`FreshIds`): their links are inserted without a read. An id it wrote, or any id of a table
    it found made, is guarded (after the upsert, by the stamp it left): an older copy changes
    neither the row nor its links, and a list that shrank loses its stale links."""

    def deal(rid: int, updated: str, *images: int) -> dict[str, Any]:
        resource = _deal(rid, updated, f"deal {rid} at {updated}")
        resource["relationships"] = {
            "images": {"data": [{"type": "images", "id": str(i)} for i in images]}
        }
        return resource

    def links() -> list[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in conn.execute(
                "SELECT deals_id, images_id, position FROM ccsync.deals_images ORDER BY 1, 3"
            )
        ]

    writer = PageWriter(conn, SCHEMA)
    page = staged("deals", [deal(1, T1, 7, 8)])
    writer.ensure_page(page)
    asked: list[str] = []
    real = conn.execute

    def counting(query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query.as_string(conn) if isinstance(query, sql.Composable) else str(query)
        if text.lstrip().upper().startswith("SELECT") and '"ccsync"."deals' in text:
            asked.append(text)  # a read of the rows or links (not of the catalogue)
        return real(query, *args, **kwargs)

    conn.execute = counting  # type: ignore[method-assign]
    try:
        writer.write_page(page)
        assert asked == []  # a new owner of a table this writer made: nothing read
        writer.write_page(staged("deals", [deal(1, T0, 9)]))  # older: refused, links kept
    finally:
        del conn.execute
    assert links() == [(1, 7, 0), (1, 8, 1)]
    writer.write_page(staged("deals", [deal(1, T2, 8)]))  # newer, a shorter list
    assert links() == [(1, 8, 0)]
    assert _rows(conn, "deals", "title") == [(1, f"deal 1 at {T2}")]
    found = PageWriter(conn, SCHEMA)  # a table made before: every owner asked
    found.write_page(staged("deals", [deal(1, T0, 5)]))
    found.write_page(staged("deals", [deal(1, T2, 6)]))  # equal stamp, new content and list
    assert links() == [(1, 6, 0)]
