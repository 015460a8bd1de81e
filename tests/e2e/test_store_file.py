"""Opening the mirror file: refusing what is not a writable database of ours, group commit,
the fresh-ids bitmap of a created table, and migrations of an older mirror."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest

from sync.core.errors import MirrorError
from sync.jobs.proving.reconcile import run_reconcile
from sync.jobs.proving.verify import run_verify
from sync.store import Mirror, PageCheckpoint, links
from tests.support.compare import compare
from tests.support.emulator_client import MakeEmulator
from tests.support.pages import DEALS, res, write_page
from tests.support.paths import ROOT
from tests.support.settings import settings_for


def test_open_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "m.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(MirrorError, match="not a SQLite database; nothing was changed"):
        Mirror.open(bad)
    assert bad.read_bytes() == b"this is not sqlite" * 100


def test_open_refuses_a_damaged_database(tmp_path: Path) -> None:
    p = tmp_path / "m.db"
    m = Mirror.open(p)
    write_page(m, DEALS, [res(i) for i in range(1, 2000)])
    m.close()
    data = bytearray(p.read_bytes())
    data[5000:9000] = b"\xff" * 4000
    p.write_bytes(bytes(data))
    with pytest.raises(MirrorError, match=r"damaged|integrity"):
        Mirror.open(p)


def test_open_refuses_a_second_writer(tmp_path: Path) -> None:
    first = Mirror.open(tmp_path / "m.db")
    try:
        with pytest.raises(MirrorError, match="in use by another sync process"):
            Mirror.open(tmp_path / "m.db")
        reader = Mirror.open(tmp_path / "m.db", readonly=True)  # readers are always welcome
        reader.close()
    finally:
        first.close()


def test_readonly_open_of_a_missing_mirror(tmp_path: Path) -> None:
    with pytest.raises(MirrorError, match="run `ccsync backfill` first"):
        Mirror.open(tmp_path / "nope.db", readonly=True)


def test_read_only_directory() -> None:
    """/proc is a read-only file system even for root: the error names it and the fix."""
    with pytest.raises(MirrorError, match="read-only") as info:
        Mirror.open("/proc/sync-test-mirror.db")
    assert "write access" in str(info.value)
    with pytest.raises(MirrorError, match="cannot create the directory"):
        Mirror.open("/proc/sync-test/mirror.db")


def test_group_commit_holds_pages_until_the_group_is_full(tmp_path: Path) -> None:
    """Readers see a group's pages (and their checkpoints) only once it commits; a crash before
    that loses them all, so the next backfill fetches those pages again: no gap."""
    m = Mirror.open(tmp_path / "m.db")
    m.backfills.start("deals", "", page_size=100, started_at="2026-01-01T00:00:00.000Z")
    m.group.start(3)
    reader = sqlite3.connect(tmp_path / "m.db")

    def visible() -> int:
        tables = {r[0] for r in reader.execute("select name from sqlite_master")}
        return (
            reader.execute("select count(*) from deals").fetchone()[0] if "deals" in tables else 0
        )

    write_page(m, DEALS, [res(1)], checkpoint=PageCheckpoint("deals", "", 1, 3))
    write_page(m, DEALS, [res(2)], checkpoint=PageCheckpoint("deals", "", 2, 3))
    assert visible() == 0
    write_page(m, DEALS, [res(3)], checkpoint=PageCheckpoint("deals", "", 3, 3))
    assert visible() == 3
    write_page(m, DEALS, [res(4)], checkpoint=PageCheckpoint("deals", "", 4, 4))
    m.conn.close()  # a crash: the open group is lost with its checkpoint
    reader.close()
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("select count(*) from deals").fetchone()[0] == 3
    assert sorted(r[0] for r in conn.execute("select page from _sync_backfill_pages")) == [1, 2, 3]
    conn.close()


def test_a_failed_page_rolls_back_its_whole_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a group a failure undoes every uncommitted page with its checkpoint (no savepoint per
    page), and forgets the included rows it had remembered: the next pages write them again."""
    m = Mirror.open(tmp_path / "m.db")
    m.backfills.start("deals", "", page_size=100, started_at="2026-01-01T00:00:00.000Z")
    m.group.start(10)
    image = {
        "id": "70",
        "type": "images",
        "attributes": {"url": "u", "updated_at": "2026-01-01T00:00:00.000Z"},
    }
    write_page(m, DEALS, [res(1)], [image], checkpoint=PageCheckpoint("deals", "", 1, 4))
    write_page(m, DEALS, [res(2)], checkpoint=PageCheckpoint("deals", "", 2, 4))
    assert m._included_seen

    def disk_full(*args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(links, "write", disk_full)
    with pytest.raises(sqlite3.OperationalError):
        write_page(m, DEALS, [res(3)], checkpoint=PageCheckpoint("deals", "", 3, 4))
    monkeypatch.undo()
    assert not m.conn.in_transaction and not m._included_seen
    assert m.table("deals").count() == 0 and m.table("images").get(70) is None
    assert m.backfills.state("deals", "").pages_done == set()  # type: ignore[union-attr]
    # the run goes on (or the next one does): the same pages land whole
    write_page(m, DEALS, [res(1)], [image], checkpoint=PageCheckpoint("deals", "", 1, 4))
    m.group.end()
    assert m.table("deals").count() == 1 and m.table("images").get(70) is not None
    m.close()


def test_group_commits_after_its_time_bound(tmp_path: Path) -> None:
    """A slow upstream must not hold pages uncommitted for long: the group also ends by time."""
    m = Mirror.open(tmp_path / "m.db")
    m.group.start(1000, seconds=0.0)
    reader = sqlite3.connect(tmp_path / "m.db")
    write_page(m, DEALS, [res(1)])
    assert reader.execute("select count(*) from deals").fetchone()[0] == 1
    reader.close()
    m.close()


def test_group_commit_widens_the_page_cache_and_gives_it_back(tmp_path: Path) -> None:
    """A bulk load gets a larger (still bounded) page cache; the daemon's writer keeps 8 MiB."""
    from sync.store.file import BULK_CACHE_KIB, CACHE_KIB

    m = Mirror.open(tmp_path / "m.db")
    assert m.conn.execute("pragma cache_size").fetchone()[0] == -CACHE_KIB
    m.group.start(10)
    assert m.conn.execute("pragma cache_size").fetchone()[0] == -BULK_CACHE_KIB
    m.group.end()
    assert m.conn.execute("pragma cache_size").fetchone()[0] == -CACHE_KIB
    m.close()


def test_fresh_ids_know_only_what_a_created_table_never_got() -> None:
    from sync.store.fresh import LIMIT, FreshIds

    fresh = FreshIds()
    assert fresh.absent("deals", [1, 2]) == set()  # not tracked: unknown, never "absent"
    fresh.track("deals")
    fresh.add("deals", [2, 70_000])
    assert fresh.absent("deals", [1, 2, 3, 70_000, 10**6]) == {1, 3, 10**6}
    assert fresh.absent("deals", [-1, LIMIT, LIMIT + 5]) == set()  # outside the bitmap: unknown
    fresh.add("deals", [LIMIT + 5])  # ignored, and still unknown
    assert fresh.absent("deals", [LIMIT + 5]) == set()


def test_migrations_bring_an_older_mirror_up_to_date_and_run_again_as_no_ops(
    tmp_path: Path,
) -> None:
    """An older file (a link table without foreign keys, a declared column typed by a first
    null, a store's `mall_id` without its membership) is migrated on open, step by step in
    order; opening it again changes nothing."""
    from sync.store.migrations import MIGRATIONS

    assert [name for name, _ in MIGRATIONS] == [
        "declared_column_types",
        "foreign_keys",
        "memberships",
        "scripts_per_position",
        "run_records",
        "unfinished_end_phase",
        "tombstone_source",
        "indexes",
    ]
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE stores (id INTEGER PRIMARY KEY, mall_id INTEGER, name TEXT);"
        "INSERT INTO stores VALUES (3, 7, 's');"
        "CREATE TABLE deals (id INTEGER PRIMARY KEY, is_local TEXT, updated_at TEXT);"
        "INSERT INTO deals VALUES (1, '1', '2026-01-01T00:00:00.000Z');"
        "CREATE TABLE deals_stores (deals_id INTEGER NOT NULL, stores_id INTEGER NOT NULL,"
        " position INTEGER, PRIMARY KEY (deals_id, stores_id)) WITHOUT ROWID;"
        "INSERT INTO deals_stores VALUES (1, 3, 0);"
    )
    conn.close()
    m = Mirror.open(db)
    assert m.schema.types("deals")["is_local"] == "INTEGER"
    assert m.table("deals").get(1)["is_local"] == 1  # type: ignore[index]
    assert m.conn.execute("PRAGMA foreign_key_list(deals_stores)").fetchall()
    assert m.conn.execute("SELECT * FROM deals_stores").fetchall() == [(1, 3, 0)]
    assert m.table("stores").malls_of(3) == [7]
    before = m.conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    m.close()
    m = Mirror.open(db)
    after = m.conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    assert after == before
    m.close()


async def test_a_mirror_written_by_the_previous_version_opens_and_converges(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    """`tests/data/mirror-6b2c21e.db.gz`: a backfill of the emulator (150 resources, seed 3) by
    the version before the layered packages (#32) and the change feed's new ops (#33). This
    version opens it (its migrations, the feed's triggers made anew), and a verify and a
    reconcile bring it level with the upstream after changes made meanwhile."""
    db = tmp_path / "mirror.db"
    db.write_bytes(gzip.decompress((ROOT / "tests" / "data" / "mirror-6b2c21e.db.gz").read_bytes()))
    async with make_emulator(resources=150, seed=3) as emu:
        emu.mutate_randomly(30, 5)
        settings = settings_for(emu, db)
        await run_verify(settings)
        _, refusals = await run_reconcile(settings)
        assert refusals == []
        diff = compare(db, emu)
        assert diff.differences == 0, diff.summary()
    triggers = {
        r[0]
        for r in sqlite3.connect(db).execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '_sync_changes_deals%'"
        )
    }
    assert "_sync_changes_deals_repair" in triggers and "_sync_changes_deals_links" in triggers
