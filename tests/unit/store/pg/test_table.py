"""`sync.store.pg.table`: one type's table of the PostgreSQL mirror answers as the SQLite one
does. The SQLite table's own tests (`tests/unit/store/test_table.py`) run here over either
store (`either`): same pages written, same calls, same answers."""

from __future__ import annotations

import pytest
from psycopg import sql

from sync.store import MirrorStore
from sync.store.pg.mirror import PgMirror
from sync.store.pg.table import PgTypeTable
from tests.support.twin_books import SCHEMA
from tests.unit.store import test_table as sqlite_tests


@pytest.fixture
def mirror(either: MirrorStore) -> MirrorStore:
    """The SQLite tests' `mirror`, as either store. Their own checks read tables by bare name
    (`mirror.conn.execute("SELECT ... FROM deals_images")`): on PostgreSQL the mirror's schema
    is put on the session's `search_path` for them. The store's own statements never rely on
    it: the other contract tests run with decoy tables of the same names in `public`."""
    if isinstance(either, PgMirror):
        either.conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(SCHEMA)))
    return either


def test_the_postgresql_mirror_hands_out_its_own_table(either: MirrorStore) -> None:
    table = either.table("deals")
    assert isinstance(table, PgTypeTable) is isinstance(either, PgMirror)


for _name in dir(sqlite_tests):
    if _name.startswith("test_"):
        globals()[_name] = getattr(sqlite_tests, _name)
