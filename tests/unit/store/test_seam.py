"""`sync.store.seam`: the SQLite mirror, its tables and its listings are what the core holds.

An open `Mirror` is a `MirrorStore`, one type's `TypeTable` a `TablePart`, a `Listing` a
`ListingPart`: at runtime (`isinstance`, and each method's parameters against the protocol's)
and at type level (`_as_the_core_holds_them`, never called, checked by mypy strict here; mypy
over `sync` checks the same wherever the core is handed a `Mirror`). The PostgreSQL listing
(`sync.store.pg.listing.Listing`) is held to `ListingPart` too; the parts are
`tests/unit/store/test_seamparts.py`'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.store import ListingPart, Mirror, MirrorStore, TablePart, TypeTable, seam
from sync.store.listing import Listing
from sync.store.pg import listing as pg_listing
from sync.store.pg.mirror import PgMirror
from sync.store.pg.table import PgTypeTable
from tests.support.protocols import members, mismatches, type_errors


def _as_the_core_holds_them(
    mirror: Mirror, table: TypeTable, listing: Listing, pg: pg_listing.Listing
) -> tuple[MirrorStore, TablePart, ListingPart, ListingPart]:
    """Never called: mypy checks that each is its protocol (`test_..._at_type_level`)."""
    return mirror, table, listing, pg


def _as_the_core_holds_postgresql(
    mirror: PgMirror, table: PgTypeTable
) -> tuple[MirrorStore, TablePart]:
    """Never called: the PostgreSQL mirror and its tables, for mypy as above."""
    return mirror, table


def test_an_open_mirror_is_a_mirror_store(mirror: Mirror) -> None:
    store: MirrorStore = mirror
    assert isinstance(store, MirrorStore)
    assert mismatches(MirrorStore, mirror) == []


def test_a_read_only_open_is_one_too(tmp_path: Path) -> None:
    """`ccsync status` and the other readers open the mirror read-only."""
    Mirror.open(tmp_path / "m.db").close()
    mirror = Mirror.open(tmp_path / "m.db", readonly=True)
    try:
        assert isinstance(mirror, MirrorStore)
    finally:
        mirror.close()


@pytest.mark.parametrize("name", ["deals", "malls", "malls_deals"])
def test_a_type_s_table_is_a_table_part(mirror: Mirror, name: str) -> None:
    """A table before it exists too, and a membership table's name (`Mirror.table`)."""
    table = mirror.table(name)
    assert isinstance(table, TablePart)
    assert mismatches(TablePart, table) == []


def test_a_listing_is_a_listing_part_inside_its_block(mirror: Mirror) -> None:
    with mirror.table("deals").listing() as listing:
        assert isinstance(listing, ListingPart)
        assert mismatches(ListingPart, listing) == []


def test_an_open_postgresql_mirror_and_its_tables_are_the_protocols(pg_db: str) -> None:
    """The PostgreSQL store (`sync.store.pg.mirror`), a writer's open and a reader's."""
    PgMirror.open(pg_db, "ccsync").close()
    for readonly in (False, True):
        mirror = PgMirror.open(pg_db, "ccsync", readonly=readonly)
        try:
            assert isinstance(mirror, MirrorStore)
            assert mismatches(MirrorStore, mirror) == []
            for name in ("deals", "malls", "malls_deals"):
                table = mirror.table(name)
                assert isinstance(table, TablePart)
                assert mismatches(TablePart, table) == []
        finally:
            mirror.close()


def test_the_postgresql_listing_names_the_same_members() -> None:
    assert mismatches(ListingPart, pg_listing.Listing) == []


def test_each_protocol_names_members_and_only_its_own() -> None:
    """What `members` reads off a protocol, which every check here rests on."""
    assert "__enter__" in members(ListingPart) and "add" in members(ListingPart)
    assert {"meta", "table", "write_staged", "repair"} <= set(members(MirrorStore))
    assert "exists" in members(TablePart) and "__init__" not in members(TablePart)


def test_a_class_missing_a_member_or_with_other_parameters_is_told() -> None:
    """`mismatches` itself: a missing method, and one whose parameter is named otherwise."""

    class Half:
        def add(self, rows: object) -> None: ...

    found = mismatches(ListingPart, Half)
    assert "Half.counts: missing" in found
    assert any(m.startswith("Half.add: parameters differ") for m in found)


def test_the_stores_are_the_protocols_at_type_level() -> None:
    """mypy strict on this file and the parts' (`_as_the_core_holds_them` in each)."""
    here = Path(__file__)
    assert type_errors([here, here.with_name("test_seamparts.py")]) == ""


def test_the_seam_module_holds_the_mirror_s_protocols() -> None:
    assert seam.MirrorStore is MirrorStore and seam.TablePart is TablePart
