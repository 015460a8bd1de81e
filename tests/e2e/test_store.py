"""The page write on real SQLite files: tables, columns, indexes, links, guards, tombstones,
listings, hours windows and bookkeeping."""

from __future__ import annotations

import sqlite3
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sync.model.stamps import now_iso
from sync.pipeline.hours import stage_hours
from sync.store import Mirror, PageCheckpoint, links
from tests.support.pages import DEALS, EVENTS, JOBS, STORES, res, write_page


def test_page_creates_table_columns_indexes_and_encodes_values(mirror: Mirror) -> None:
    write_page(
        mirror,
        DEALS,
        [res(1, is_active=True, tags_list=["a"], obj={"k": 1}, price=1.5, seo_slug="x")],
    )
    row = mirror.table("deals").get(1)
    assert row == {
        "id": 1,
        "title": "t1",
        "updated_at": "2026-01-01T00:00:00.000Z",
        "is_active": 1,
        "tags_list": '["a"]',
        "obj": '{"k":1}',
        "price": 1.5,
        "seo_slug": "x",
    }
    indexes = {r[1] for r in mirror.conn.execute("PRAGMA index_list(deals)")}
    assert {"idx_deals_updated_at", "idx_deals_seo_slug"} <= indexes
    assert mirror.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _index_names(m: Mirror, table: str) -> set[str]:
    return {r[1] for r in m.conn.execute(f"PRAGMA index_list({table})")}


def test_bulk_load_defers_content_and_link_indexes_until_the_end(tmp_path: Path) -> None:
    linked = res(1, seo_slug="s")
    linked["relationships"] = {"images": {"data": [{"type": "images", "id": "5"}]}}
    m = Mirror.open(tmp_path / "m.db")
    m.indexes.defer(True)
    write_page(m, DEALS, [linked])
    assert _index_names(m, "deals") <= {"sqlite_autoindex_deals_1"}
    assert "idx_deals_images_images_id" not in _index_names(m, "deals_images")
    m.indexes.defer(False)
    assert {"idx_deals_updated_at", "idx_deals_seo_slug"} <= _index_names(m, "deals")
    assert "idx_deals_images_images_id" in _index_names(m, "deals_images")
    m.close()


def test_bulk_load_interrupted_gets_its_indexes_when_reopened(tmp_path: Path) -> None:
    linked = res(1)
    linked["relationships"] = {"images": {"data": [{"type": "images", "id": "5"}]}}
    m = Mirror.open(tmp_path / "m.db")
    m.indexes.defer(True)
    write_page(m, DEALS, [linked])
    m.close()  # killed before the end of the load: no indexes yet
    m = Mirror.open(tmp_path / "m.db")
    assert "idx_deals_updated_at" in _index_names(m, "deals")
    assert "idx_deals_images_images_id" in _index_names(m, "deals_images")
    m.close()


def test_new_attribute_adds_a_column(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1)])
    write_page(mirror, DEALS, [res(2, brand_new="yes")])
    assert mirror.table("deals").get(2)["brand_new"] == "yes"  # type: ignore[index]
    assert mirror.table("deals").get(1)["brand_new"] is None  # type: ignore[index]


def test_older_copy_never_overwrites_newer(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1, "2026-02-01T00:00:00.000Z", title="new")])
    write_page(mirror, DEALS, [res(1, "2026-01-01T00:00:00.000Z", title="old")])
    assert mirror.table("deals").get(1)["title"] == "new"  # type: ignore[index]
    write_page(mirror, DEALS, [res(1, "2026-02-01T00:00:00.000Z", title="same stamp")])
    assert mirror.table("deals").get(1)["title"] == "same stamp"  # type: ignore[index]


def test_links_replaced_only_with_linkage_and_included_rows(mirror: Mirror) -> None:
    with_links = res(1)
    with_links["relationships"] = {
        "images": {"data": [{"type": "images", "id": "5"}, {"type": "images", "id": "6"}]}
    }
    included = [
        {
            "id": "5",
            "type": "images",
            "attributes": {"url": "u5", "updated_at": "2026-01-01T00:00:00.000Z"},
        }
    ]
    write_page(mirror, DEALS, [with_links], included)

    def links():
        return sorted(mirror.conn.execute("select deals_id, images_id, position from deals_images"))

    assert links() == [(1, 5, 0), (1, 6, 1)]
    write_page(mirror, DEALS, [res(1, "2026-01-02T00:00:00.000Z")])  # no linkage: links kept
    assert links() == [(1, 5, 0), (1, 6, 1)]
    with_links["relationships"]["images"]["data"] = [{"type": "images", "id": "6"}]
    with_links["attributes"]["updated_at"] = "2026-01-03T00:00:00.000Z"  # a newer copy
    write_page(mirror, DEALS, [with_links])
    assert links() == [(1, 6, 0)]
    assert mirror.table("images").get(5)["url"] == "u5"  # type: ignore[index]
    join = mirror.conn.execute(
        "select images.url from images join deals_images on images_id = images.id where deals_id = 1"
    ).fetchall()
    assert join == []  # image 6 was never included: the join only finds mirrored images


def test_included_rows_do_not_null_columns_they_lack(mirror: Mirror) -> None:
    write_page(mirror, STORES, [res(3, type_="stores", name="s")], mall_id=7)
    store = {
        "id": "3",
        "type": "stores",
        "attributes": {"name": "s2", "updated_at": "2026-01-01T00:00:00.000Z"},
    }
    write_page(mirror, DEALS, [res(1)], [store])
    assert mirror.table("stores").get(3)["mall_id"] == 7  # type: ignore[index]
    assert mirror.table("stores").get(3)["name"] == "s2"  # type: ignore[index]


def test_to_one_column_meta_columns_and_scripts(mirror: Mirror) -> None:
    event = res(4, type_="events")
    event["relationships"] = {"mall": {"data": {"type": "malls", "id": "9"}}}
    write_page(mirror, EVENTS, [event], scripts=[{"type": "text/javascript", "content": "x()"}])
    assert mirror.table("events").get(4)["mall_id"] == 9  # type: ignore[index]
    job = res(8, type_="job_listings")
    job["meta"] = {"deprecated_fields": ["salary"]}
    write_page(mirror, JOBS, [job])
    assert mirror.table("job_listings").get(8)["meta_deprecated_fields"] == '["salary"]'  # type: ignore[index]
    assert mirror.conn.execute(
        "select type, channel, position, script_type, content from meta_scripts"
    ).fetchall() == [("events", "mall", 0, "text/javascript", "x()")]


def test_checkpoint_commits_with_its_page_or_not_at_all(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror.backfills.start("deals", "", page_size=100, started_at="2026-01-01T00:00:00.000Z")
    write_page(mirror, DEALS, [res(1)], checkpoint=PageCheckpoint("deals", "", 1, 3))

    def disk_full(*args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(links, "write", disk_full)  # fails after the rows were upserted
    with pytest.raises(sqlite3.OperationalError):
        write_page(mirror, DEALS, [res(3)], checkpoint=PageCheckpoint("deals", "", 2, 3))
    monkeypatch.undo()
    state = mirror.backfills.state("deals", "")
    assert state is not None and state.pages_done == {1} and state.last == 3
    assert mirror.table("deals").get(3) is None  # nothing of the failed page committed
    mirror.backfills.finish("deals", "", finished_at="x")
    assert mirror.backfills.state("deals", "").finished_at == "x"  # type: ignore[union-attr]
    mirror.backfills.reset()
    assert mirror.backfills.state("deals", "") is None and mirror.table("deals").count() == 1


def test_tombstones_prevent_resurrection(mirror: Mirror) -> None:
    linked = res(1)
    linked["relationships"] = {"images": {"data": [{"type": "images", "id": "5"}]}}
    write_page(mirror, DEALS, [linked, res(2)])
    assert mirror.table("deals").apply_feed({1: now_iso()}).removed == 1
    assert mirror.conn.execute("select count(*) from deals_images").fetchone()[0] == 0
    result = write_page(mirror, DEALS, [res(1, "2026-03-01T00:00:00.000Z"), res(2)])
    assert mirror.table("deals").get(1) is None and result.skipped_deleted == 1


def test_listing_diff(mirror: Mirror) -> None:
    write_page(
        mirror,
        STORES,
        [res(1, type_="stores"), res(2, type_="stores"), res(3, type_="stores")],
        mall_id=1,
    )
    write_page(mirror, STORES, [res(9, type_="stores")], mall_id=2)
    with mirror.table("stores").listing(1) as listing:
        listing.add(
            [
                (1, "2026-01-01T00:00:00.000Z"),
                (2, "2026-05-01T00:00:00.000Z"),
                (4, "2026-01-01T00:00:00.000Z"),
            ]
        )
        assert listing.counts() == (3, 3)
        assert [i for b in listing.missing_or_stale() for i in b] == [2, 4]
        assert [i for b in listing.absent() for i in b] == [3]  # 9 is another mall's
    with mirror.table("programs").listing() as empty:  # no table yet
        empty.add([(5, None)])
        assert list(empty.missing_or_stale()) == [[5]] and list(empty.absent()) == []


def test_hours_window_replace_and_current_hours(mirror: Mirror) -> None:
    def day(d, t="10-9"):
        return {
            "id": d,
            "type": "hours",
            "attributes": {"date": d, "day": "X", "hours_text": t, "description": ""},
        }

    both = stage_hours(1, [day("2026-11-01"), day("2026-11-02")])
    mirror.hours.write(1, both, date(2026, 11, 1), date(2026, 11, 2))
    closed = stage_hours(1, [day("2026-11-02", "closed")])
    mirror.hours.write(1, closed, date(2026, 11, 2), date(2026, 11, 2))
    rows = mirror.conn.execute("select date, hours_text from hours order by date").fetchall()
    assert rows == [("2026-11-01", "10-9"), ("2026-11-02", "closed")]
    mirror.hours.write_current(1, {"data": {"is_open": True}})
    assert (
        mirror.conn.execute("select body from current_hours").fetchone()[0]
        == '{"data":{"is_open":true}}'
    )


def test_bookkeeping_cursors_status_and_runs(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1)])
    mirror.cursors.set("deals", "filter[visibility]=Public", "2026-01-01T00:00:00.000Z")
    mirror.types.record("deals", ok=False, error="boom", at="t1")
    run = mirror.runs.start("backfill")
    mirror.runs.finish(run, status="ok", rows=1, error=None)
    st = {s.type_name: s for s in mirror.types.lines()}
    assert st["deals"].rows == 1 and st["deals"].last_error == "boom"
    assert st["deals"].cursor == "2026-01-01T00:00:00.000Z"
    mirror.types.record("deals", ok=True, at="t2")
    assert {s.type_name: s for s in mirror.types.lines()}["deals"].as_dict()["last_error"] is None
    tables = {
        r[0] for r in mirror.conn.execute("select name from sqlite_master where type='table'")
    }
    assert all(
        t.startswith(("_sync_", "sqlite_", "deals_fts"))
        or t in {"deals", "meta_scripts", "current_hours"}
        for t in tables
    )


def test_write_path_at_volume(mirror: Mirror) -> None:
    for page in range(200):
        write_page(mirror, DEALS, [res(page * 100 + i) for i in range(1, 101)])
    assert mirror.table("deals").count() == 20_000
    assert sum(1 for _ in mirror.table("deals").ids()) == 20_000


def test_a_mall_listing_claims_its_rows_mall(tmp_path: Path) -> None:
    """A store first written as a deal's included copy has no mall; the reconcile listing of
    its mall gives it one, and a row another mall lists too belongs to both (`malls_stores`);
    `mall_id` is the lowest of them."""
    from sync.model import catalogue
    from sync.store import Mirror

    m = Mirror.open(tmp_path / "m.db")
    stamp = "2026-01-01T00:00:00.000Z"
    write_page(
        m,
        catalogue.TYPES["stores"],
        [{"id": "1", "type": "stores", "attributes": {"name": "a", "updated_at": stamp}}],
        mall_id=3,
    )
    deal = {
        "id": "9",
        "type": "deals",
        "attributes": {"title": "d", "updated_at": stamp},
        "relationships": {"stores": {"data": [{"type": "stores", "id": "2"}]}},
    }
    included = [{"id": "2", "type": "stores", "attributes": {"name": "b", "updated_at": stamp}}]
    write_page(m, catalogue.TYPES["deals"], [deal], included)
    malls = dict(m.conn.execute("SELECT id, mall_id FROM stores"))
    assert malls == {1: 3, 2: None}
    with m.table("stores").listing(5) as listing:
        listing.add([(1, stamp), (2, stamp)])
        assert listing.claim_mall() == 2
    assert dict(m.conn.execute("SELECT id, mall_id FROM stores")) == {1: 3, 2: 5}
    pairs = set(m.conn.execute("SELECT malls_id, stores_id FROM malls_stores"))
    assert pairs == {(3, 1), (5, 1), (5, 2)}
    # Left mall 3: a change of membership; `mall_id` follows the table, the row stays.
    assert m.table("stores").remove_memberships(3, [1]) == 1
    assert dict(m.conn.execute("SELECT id, mall_id FROM stores")) == {1: 5, 2: 5}
    assert m.table("stores").remove_memberships(5, [1]) == 1
    assert m.table("stores").get(1) is not None and m.table("stores").get(1)["mall_id"] is None
    assert list(m.table("stores").orphans()) == [[1]]
    m.close()


def _linked(rid: int, updated: str, images: list[int], tags: list[int]) -> dict[str, Any]:
    r = res(rid, updated)
    r["relationships"] = {
        "images": {"data": [{"type": "images", "id": str(i)} for i in images]},
        "tags": {"data": [{"type": "tags", "id": str(i)} for i in tags]},
    }
    return r


def _tag(rid: int, related: list[int]) -> dict[str, Any]:
    """An included tag (no updated_at: no guard) with its own linkage (`tags.tags`)."""
    return {
        "id": str(rid),
        "type": "tags",
        "attributes": {"name": f"tag{rid}"},
        "relationships": {"tags": {"data": [{"type": "tags", "id": str(i)} for i in related]}},
    }


@pytest.mark.parametrize("reopen", [False, True], ids=["created-here", "reopened"])
def test_links_of_a_rewritten_owner_are_replaced_whether_or_not_the_mirror_made_its_table(
    tmp_path: Path, reopen: bool
) -> None:
    """A table the mirror created skips the link DELETE of owners it never wrote (`FreshIds`);
    an owner written before (this run, or an interrupted run's page written again on resume)
    still has its old links replaced, not merged, in link tables with and without a guard."""
    m = Mirror.open(tmp_path / "m.db")
    m.indexes.defer(True)
    write_page(m, DEALS, [_linked(1, "2026-01-01T00:00:00.000Z", [5, 6], [7])], [_tag(7, [8, 9])])
    if reopen:
        m.close()
        m = Mirror.open(tmp_path / "m.db")
        m.indexes.defer(True)
    write_page(
        m,
        DEALS,
        [
            _linked(1, "2026-01-02T00:00:00.000Z", [6], [8]),
            _linked(2, "2026-01-02T00:00:00.000Z", [5], []),
        ],
        [_tag(7, [9]), _tag(8, [])],
    )
    # An older copy of deal 1 changes neither its row nor its links.
    write_page(m, DEALS, [_linked(1, "2026-01-01T00:00:00.000Z", [5], [7])])
    assert sorted(m.conn.execute("select deals_id, images_id from deals_images")) == [
        (1, 6),
        (2, 5),
    ]
    assert sorted(m.conn.execute("select deals_id, tags_id from deals_tags")) == [(1, 8)]
    assert sorted(m.conn.execute("select tags_id, related_tags_id from tags_tags")) == [(7, 9)]
    m.close()


def test_a_link_table_left_from_a_dropped_content_table_is_not_taken_for_empty(
    tmp_path: Path,
) -> None:
    """A content table dropped by hand leaves its link rows: the recreated table is not
    treated as new (`FreshIds`), so a rewritten owner's stale links are still replaced."""
    m = Mirror.open(tmp_path / "m.db")
    write_page(m, DEALS, [_linked(1, "2026-01-01T00:00:00.000Z", [5, 6], [])])
    m.conn.execute("DROP TABLE deals")
    m.close()
    m = Mirror.open(tmp_path / "m.db")
    write_page(m, DEALS, [_linked(1, "2026-01-02T00:00:00.000Z", [6], [])])
    assert sorted(m.conn.execute("select deals_id, images_id from deals_images")) == [(1, 6)]
    m.close()
