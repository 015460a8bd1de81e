"""`sync.store.pg.hours`: the PostgreSQL hours held to the SQLite ones' contract.

The contract tests take `store` and run twice: `sqlite` is a `Mirror` opened on a file in the
test's directory (`mirror.hours`, `mirror.schema`), `postgres` this module's `Hours` over a
`sync.store.pg.schema.Schema` of a fresh database (`pg_db`, autocommit) in a schema with an
awkward name, after `ensure_hours` (SQLite makes `current_hours` when it opens). Each asserts the
same of both: a range replaced for one mall only, a day outside it replaced whole, a new
attribute's column (seen by the schema at once), an empty first refresh making the table, the
current hours kept whole. `Store.rows` reads with one statement written once for both, the
`body` decoded (text in SQLite, jsonb here). The tests after them are PostgreSQL's own: the
table's types, a value that does not fit widening its column (a null fits any), an attribute
only a later day has, names PostgreSQL cannot take, NUL, the columns read once and again after a
change, and of a day given twice the last copy compared with what is held. The last ones run
beside a bulk load's pages, in `PgMirror`'s open group: no read and no savepoint there, committed
with the group, and gone with it when it rolls back, the table or columns made in it too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from psycopg import pq, sql

from sync.pipeline.hours import stage_hours
from sync.store import Mirror
from sync.store.hours import EMPTY_DAY, by_columns
from sync.store.pg import hours as pg_hours
from sync.store.pg import schema as pg_schema
from sync.store.pg.hours import Hours, ensure_hours, wanted
from sync.store.pg.mirror import PgMirror
from sync.store.pg.schema import Schema
from tests.support.rawsql import pg_rolled_back, pg_run, sqlite_rolled_back
from tests.unit.store.pg.test_pagewrite import T1, _deal, _deals

SCHEMA = 'Hours "h"'
MARCH = (date(2026, 3, 1), date(2026, 3, 9))


def _day(d: str, text: str, mall: int = 1, **more: object) -> dict[str, object]:
    return {"mall_id": mall, "date": d, "fetched_at": "x", "day": "Mon", "hours_text": text, **more}


@dataclass
class Store:
    """One implementation's hours, and what a test needs behind them."""

    kind: str
    hours: Any
    #: The schema the hours write through (`columns`).
    schema: Any
    #: The rows of one statement (tables named bare, `?` placeholders), `body` decoded.
    rows: Callable[..., list[tuple[Any, ...]]]
    rolled_back: Callable[[], contextlib.AbstractContextManager[None]]


def _sqlite(tmp_path: Path) -> Iterator[Store]:
    mirror = Mirror.open(tmp_path / "m.db")
    conn = mirror.conn

    def rows(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        cur = conn.execute(statement, params)
        names = [d[0] for d in cur.description]
        return [
            tuple(
                orjson.loads(v) if c == "body" and v is not None else v
                for v, c in zip(r, names, strict=True)
            )
            for r in cur
        ]

    rolled_back = sqlite_rolled_back(conn)

    try:
        yield Store("sqlite", mirror.hours, mirror.schema, rows, rolled_back)
    finally:
        mirror.close()


def _run(conn: psycopg.Connection[Any], statement: str, params: Any) -> list[tuple[Any, ...]]:
    return pg_run(conn, SCHEMA, r"hours|current_hours", statement, params)


def _postgres(dsn: str) -> Iterator[Store]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_hours(conn, SCHEMA)
        schema = Schema(conn, SCHEMA)

        rolled_back = pg_rolled_back(conn)

        yield Store(
            "postgres",
            Hours(schema),
            schema,
            lambda statement, *params: _run(conn, statement, params),
            rolled_back,
        )


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The hours of either mirror, no `hours` table yet (the PostgreSQL server is started only
    for the `postgres` runs)."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_db"))


@pytest.fixture
def pg(pg_db: str) -> Iterator[Store]:
    yield from _postgres(pg_db)


# -- the contract: both implementations ------------------------------------------------------


def test_a_refresh_replaces_the_range_of_one_mall_only(store: Store) -> None:
    hours = store.hours
    days = [_day("2026-03-01", "9-5"), _day("2026-03-02", "9-5"), _day("2026-03-09", "9-9")]
    assert hours.write(1, days, *MARCH) == 3
    hours.write(2, [_day("2026-03-02", "10-4", 2)], *MARCH)
    n = hours.write(1, [_day("2026-03-02", "closed")], date(2026, 3, 1), date(2026, 3, 5))
    assert n == 1
    assert store.rows("SELECT mall_id, date, hours_text FROM hours ORDER BY mall_id, date") == [
        (1, "2026-03-02", "closed"),  # 03-01 no longer listed: gone
        (1, "2026-03-09", "9-9"),  # outside the range: kept
        (2, "2026-03-02", "10-4"),  # another mall: kept
    ]


def test_a_day_outside_the_range_given_again_is_replaced_whole(store: Store) -> None:
    store.hours.write(1, [_day("2026-03-20", "9-5", note="busy")], *MARCH)
    store.hours.write(1, [_day("2026-03-20", "10-6")], *MARCH)  # no note this time
    assert store.rows("SELECT date, hours_text, note FROM hours") == [("2026-03-20", "10-6", None)]


def test_a_day_given_twice_in_one_refresh_is_written_as_sqlite_groups_them(store: Store) -> None:
    """Rows are written a group of columns at a time, groups in the order first met: of one
    day's copies the last of the last group stands (its other columns NULL)."""
    days = [_day("2026-03-01", "a"), _day("2026-03-01", "b"), _day("2026-03-01", "c")]
    assert store.hours.write(1, days, *MARCH) == 3
    assert store.rows("SELECT hours_text FROM hours") == [("c",)]
    days = [
        _day("2026-03-02", "a", note="n"),
        _day("2026-03-02", "b"),
        _day("2026-03-02", "c", note="m"),
    ]
    store.hours.write(1, days, *MARCH)
    assert store.rows("SELECT date, hours_text, note FROM hours") == [("2026-03-02", "b", None)]


def test_a_new_attribute_adds_a_column_and_an_empty_refresh_makes_the_table(
    store: Store,
) -> None:
    assert store.hours.write(1, [], *MARCH) == 0
    assert {"mall_id", "date", "fetched_at", *EMPTY_DAY} == store.schema.columns("hours")
    store.hours.write(
        1, [_day("2026-03-01", "9-5", is_closed=1)], date(2026, 3, 1), date(2026, 3, 1)
    )
    assert "is_closed" in store.schema.columns("hours")  # seen at once
    assert store.rows("SELECT date, is_closed, description FROM hours") == [("2026-03-01", 1, None)]
    assert store.hours.write(1, [], *MARCH) == 0  # a table already: the range emptied
    assert store.rows("SELECT count(*) FROM hours") == [(0,)]


def test_staged_days_are_written_with_their_types(store: Store) -> None:
    items = [
        {"id": "a", "attributes": {"date": "2026-03-01", "open": True, "n": 2.5, "x": {"k": 1}}},
        {"id": "2026-03-02", "attributes": {"open": False, "n": 3.5, "x": None}},
    ]
    assert store.hours.write(4, stage_hours(4, items), *MARCH) == 2
    assert store.rows("SELECT mall_id, date, open, n, x FROM hours ORDER BY date") == [
        (4, "2026-03-01", 1, 2.5, '{"k":1}'),
        (4, "2026-03-02", 0, 3.5, None),
    ]


def test_current_hours_keep_the_latest_answer_whole(store: Store) -> None:
    store.hours.write_current(4, {"open": True, "until": "21:00"})
    store.hours.write_current(4, {"open": False})
    store.hours.write_current(5, [1, "a"])
    assert store.rows("SELECT mall_id, body FROM current_hours ORDER BY mall_id") == [
        (4, {"open": False}),
        (5, [1, "a"]),
    ]
    assert all(isinstance(r[0], str) for r in store.rows("SELECT fetched_at FROM current_hours"))


def test_a_refresh_inside_a_transaction_goes_with_it(store: Store) -> None:
    store.hours.write(1, [_day("2026-03-01", "9-5")], *MARCH)
    with store.rolled_back():
        store.hours.write(1, [_day("2026-03-02", "x")], *MARCH)
        store.hours.write_current(1, {"open": True})
    assert store.rows("SELECT date FROM hours") == [("2026-03-01",)]
    assert store.rows("SELECT count(*) FROM current_hours") == [(0,)]


# -- the shared rule ---------------------------------------------------------------------------


def test_rows_are_grouped_by_their_columns_in_the_order_first_met() -> None:
    a, b, c = {"x": 1}, {"x": 2, "y": 3}, {"x": 4}
    assert by_columns([a, b, c]) == {("x",): [a, c], ("x", "y"): [b]}


# -- PostgreSQL's own ------------------------------------------------------------------------


def _types(store: Store) -> dict[str, tuple[str, str | None]]:
    rows = store.rows(
        "SELECT column_name, data_type, collation_name FROM information_schema.columns"
        " WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
        SCHEMA,
        "hours",
    )
    return {name: (kind, coll) for name, kind, coll in rows}


def test_the_table_takes_sqlites_affinities_and_compares_dates_byte_by_byte(pg: Store) -> None:
    pg.hours.write(1, [_day("2026-03-01", "9-5", n=1, f=0.5, none=None)], *MARCH)
    assert _types(pg) == {
        "mall_id": ("bigint", None),
        "date": ("text", "C"),
        "fetched_at": ("text", "C"),
        "day": ("text", None),
        "hours_text": ("text", None),
        "n": ("bigint", None),
        "f": ("double precision", None),
        "none": ("text", None),
    }
    keys = pg.rows(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
        " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = ?::regclass AND i.indisprimary"
        " ORDER BY a.attname",
        sql.Identifier(SCHEMA, "hours").as_string(None),
    )
    assert keys == [("date",), ("mall_id",)]


def _one(d: str) -> tuple[date, date]:
    """The range of the one day `d`."""
    return date.fromisoformat(d), date.fromisoformat(d)


def test_a_value_that_does_not_fit_widens_its_column(pg: Store) -> None:
    pg.hours.write(1, [_day("2026-03-01", "a", n=1, m=2)], *_one("2026-03-01"))
    pg.hours.write(1, [_day("2026-03-02", "b", n=1.5, m="late")], *_one("2026-03-02"))
    assert _types(pg)["n"] == ("double precision", None)
    assert _types(pg)["m"] == ("text", None)
    assert pg.rows("SELECT date, n, m FROM hours ORDER BY date") == [
        ("2026-03-01", 1.0, "2"),  # SQLite keeps 2 an integer beside 'late'
        ("2026-03-02", 1.5, "late"),
    ]
    pg.hours.write(1, [_day("2026-03-03", "c", n=7, m=3)], *_one("2026-03-03"))  # narrower
    assert pg.rows("SELECT n, m FROM hours WHERE date = '2026-03-03'") == [(7.0, "3")]


def test_an_attribute_only_a_later_day_has_gets_its_column(pg: Store) -> None:
    days = [_day("2026-03-01", "a"), _day("2026-03-02", "b", note=None, later=True)]
    pg.hours.write(1, days, *MARCH)
    assert _types(pg)["later"] == ("bigint", None) and _types(pg)["note"] == ("text", None)
    assert pg.rows("SELECT date, later FROM hours ORDER BY date") == [
        ("2026-03-01", None),
        ("2026-03-02", 1),
    ]
    assert wanted([{"a": None}, {"a": 1}, {"a": "x"}, {"a": 2}]) == {"a": "text"}


def test_an_attribute_postgresql_cannot_name_is_left_out(pg: Store) -> None:
    long_name = "a" * 64
    pg.hours.write(1, [_day("2026-03-01", "a", xmin=1, **{long_name: 2})], *MARCH)
    assert "xmin" not in _types(pg) and long_name not in _types(pg)
    assert pg.rows("SELECT hours_text FROM hours") == [("a",)]


def test_nul_in_text_and_in_a_body_is_kept_as_a_replacement_character(pg: Store) -> None:
    pg.hours.write(1, [_day("2026-03-01", "9\x005")], *MARCH)
    pg.hours.write_current(1, {"a\x00": "b\x00"})
    assert pg.rows("SELECT hours_text FROM hours") == [("9\ufffd5",)]
    assert pg.rows("SELECT body FROM current_hours") == [({"a\ufffd": "b\ufffd"},)]
    assert pg_hours.affinity(True) == "bigint"


def test_an_unchanged_refresh_rewrites_nothing_and_a_changed_one_only_what_differs(
    pg: Store,
) -> None:
    """A refresh writes only what differs (PostgreSQL's own: SQLite rewrites the range): a day
    held the same keeps its version (`xmin`) and its `fetched_at`, a changed day is replaced
    whole, a day the range no longer serves goes, the other malls' days stay."""
    days = [_day("2026-03-01", "a"), _day("2026-03-02", "b", note="x")]
    pg.hours.write(1, days, *MARCH)
    pg.hours.write(2, [_day("2026-03-01", "other mall", mall=2)], *MARCH)

    def held() -> dict[tuple[int, str], tuple[Any, ...]]:
        return {
            (r[0], r[1]): r[2:]
            for r in pg.rows("SELECT mall_id, date, xmin::text, hours_text, note FROM hours")
        }

    before = held()
    again = [{**d, "fetched_at": "y"} for d in days]
    pg.hours.write(1, again, *MARCH)
    assert held() == before  # not a row version changed, `fetched_at` kept
    pg.hours.write(1, [{**again[1], "note": None}], *MARCH)
    after = held()
    assert (1, "2026-03-01") not in after  # no longer served
    assert after[(1, "2026-03-02")][1:] == ("b", None)
    assert after[(1, "2026-03-02")][0] != before[(1, "2026-03-02")][0]
    assert after[(2, "2026-03-01")] == before[(2, "2026-03-01")]
    assert pg.rows("SELECT fetched_at FROM hours WHERE mall_id = 1") == [("y",)]


def test_a_null_fits_any_column(pg: Store) -> None:
    """A refresh whose values of a numeric column are all null leaves its type as it is, with
    or without another column to make (it once widened it to text, rewriting the table)."""
    pg.hours.write(1, [_day("2026-03-01", "a", n=1, f=0.5)], *_one("2026-03-01"))
    pg.hours.write(2, [_day("2026-03-01", "b", 2, n=None, f=None)], *_one("2026-03-01"))
    pg.hours.write(3, [_day("2026-03-01", "c", 3, n=None, f=None, new=1)], *_one("2026-03-01"))
    assert _types(pg)["n"] == ("bigint", None) and _types(pg)["f"] == ("double precision", None)
    assert pg.rows("SELECT mall_id, n, f, new FROM hours ORDER BY mall_id") == [
        (1, 1, 0.5, None),
        (2, None, None, None),
        (3, None, None, 1),
    ]
    assert pg_hours.fits({"n": "bigint"}, [{"n": None}, {"n": True}])
    assert not pg_hours.fits({"n": "bigint"}, [{"n": 1}, {"n": 1.5}])


def test_the_columns_are_read_once_and_again_after_a_change(
    pg: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh asks the catalogue nothing when its columns are known (the schema's cache), and
    reads them again after it made or changed one: a column set that changes between malls, a
    value widening its column."""
    reads: list[str] = []
    real = pg_schema.table_types

    def counted(conn: psycopg.Connection[Any], schema: str, table: str) -> dict[str, str]:
        reads.append(table)
        return real(conn, schema, table)

    monkeypatch.setattr(pg_schema, "table_types", counted)
    pg.hours.write(1, [_day("2026-03-01", "a")], *MARCH)
    assert reads == ["hours", "hours"]  # none yet; made, read again
    pg.hours.write(2, [_day("2026-03-01", "b", 2), _day("2026-03-02", "c", 2)], *MARCH)
    assert len(reads) == 2
    pg.hours.write(3, [_day("2026-03-01", "d", 3, note="x")], *MARCH)  # a new column
    pg.hours.write(1, [_day("2026-03-01", "a"), _day("2026-03-02", "e")], *MARCH)  # without it
    assert len(reads) == 3
    pg.hours.write(2, [_day("2026-03-01", "b", 2, note=7)], *MARCH)  # a text column takes 7
    pg.hours.write(2, [_day("2026-03-01", "b", 2, n=1)], *MARCH)
    assert len(reads) == 4
    pg.hours.write(3, [_day("2026-03-01", "d", 3, n=0.5, note="x")], *MARCH)  # n widened
    assert len(reads) == 5 and _types(pg)["n"] == ("double precision", None)
    assert pg.rows("SELECT mall_id, date, hours_text, note, n FROM hours ORDER BY 1, 2") == [
        (1, "2026-03-01", "a", None, None),
        (1, "2026-03-02", "e", None, None),
        (2, "2026-03-01", "b", None, 1.0),
        (3, "2026-03-01", "d", "x", 0.5),
    ]


def test_of_a_day_given_twice_the_last_copy_is_compared_with_what_is_held(pg: Store) -> None:
    """One statement writes a column set's days (it cannot touch a row twice): of a day's
    copies the last, left as it is when the same as held, whatever the copies before it."""
    pg.hours.write(1, [_day("2026-03-01", "a"), _day("2026-03-02", "b")], *MARCH)
    before = pg.rows("SELECT date, xmin::text, hours_text FROM hours ORDER BY date")
    days = [_day("2026-03-02", "x"), _day("2026-03-01", "a"), _day("2026-03-02", "b")]
    assert pg.hours.write(1, days, *MARCH) == 3
    assert pg.rows("SELECT date, xmin::text, hours_text FROM hours ORDER BY date") == before
    pg.hours.write(1, [_day("2026-03-01", "y"), _day("2026-03-01", "z")], *_one("2026-03-01"))
    assert pg.rows("SELECT date, hours_text FROM hours ORDER BY date") == [
        ("2026-03-01", "z"),
        ("2026-03-02", "b"),
    ]


# -- beside a bulk load's pages (`PgMirror.group`) ---------------------------------------------


@pytest.fixture
def mirror(pg_db: str) -> Iterator[PgMirror]:
    """A whole mirror in `SCHEMA` whose `deals` table exists (a page written), no group open."""
    opened = PgMirror.open(pg_db, SCHEMA)
    try:
        opened.write_staged([_deals(_deal(1, T1, "a"))])
        yield opened
    finally:
        opened.close()


def _open_group(mirror: PgMirror) -> None:
    """A bulk load's group, opened by its first page: a transaction in pipeline mode."""
    mirror.group.start(100)
    mirror.write_staged([_deals(_deal(2, T1, "b"))])
    assert mirror.group.open and mirror.conn.pgconn.pipeline_status != pq.PipelineStatus.OFF


def _roll_back(mirror: PgMirror) -> None:
    """The open group fails (a page's error): it rolls back whole, and ends."""
    with pytest.raises(RuntimeError, match="boom"), mirror._page_transaction():
        raise RuntimeError("boom")
    mirror.group.end()


def _seen(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    """What another session sees (committed rows only)."""
    with psycopg.connect(dsn, autocommit=True) as other:
        return _run(other, statement, ())


def _type(dsn: str, column: str) -> list[tuple[Any, ...]]:
    """The type of `column` of `hours` as another session sees it ([] when it has none)."""
    with psycopg.connect(dsn, autocommit=True) as other:
        return other.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = 'hours' AND column_name = %s",
            (SCHEMA, column),
        ).fetchall()


def _waited(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the refresh waited for the server (a read or a savepoint)")


def test_a_refresh_in_a_group_waits_for_nothing_and_commits_with_it(
    mirror: PgMirror, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside the group its statements are a part of its transaction: no read (the columns are
    known), no savepoint; a day given thrice is one row of its statement."""
    mirror.hours.write(1, [_day("2026-03-01", "9-5")], *MARCH)
    _open_group(mirror)
    with monkeypatch.context() as m:
        for name in ("fetchone", "fetchall", "fetchmany"):
            m.setattr(psycopg.Cursor, name, _waited)
        m.setattr(mirror.conn, "transaction", _waited)
        mirror.hours.write(1, [_day("2026-03-01", "9-6")], *MARCH)
        mirror.hours.write(2, [_day("2026-03-01", t, 2) for t in ("a", "b", "c")], *MARCH)
    statement = "SELECT mall_id, hours_text FROM hours ORDER BY mall_id"
    assert _seen(pg_db, statement) == [(1, "9-5")]  # in the open group, not committed
    mirror.group.end()
    assert _seen(pg_db, statement) == [(1, "9-6"), (2, "c")]


def test_a_group_rolled_back_takes_the_refresh_and_the_table_it_made(
    mirror: PgMirror, pg_db: str
) -> None:
    """The mirror forgets the columns it had cached: the next refresh makes the table again."""
    _open_group(mirror)
    mirror.hours.write(1, [_day("2026-03-01", "9-5")], *MARCH)  # the table made in the group
    mirror.hours.write(2, [_day("2026-03-01", "9-6", 2)], *MARCH)
    _roll_back(mirror)
    assert _type(pg_db, "mall_id") == []  # no table
    mirror.hours.write(3, [_day("2026-03-01", "10-4", 3)], *MARCH)
    assert _seen(pg_db, "SELECT mall_id, hours_text FROM hours") == [(3, "10-4")]


def test_a_column_added_or_widened_in_a_rolled_back_group_is_made_again(
    mirror: PgMirror, pg_db: str
) -> None:
    mirror.hours.write(1, [_day("2026-03-01", "a", n=1)], *MARCH)
    _open_group(mirror)
    mirror.hours.write(2, [_day("2026-03-01", "b", 2, n=1.5, note="new")], *MARCH)
    _roll_back(mirror)
    assert _type(pg_db, "n") == [("bigint",)] and _type(pg_db, "note") == []
    _open_group(mirror)
    mirror.hours.write(2, [_day("2026-03-01", "b", 2, n=2.5, note="again")], *MARCH)
    mirror.group.end()
    assert _type(pg_db, "n") == [("double precision",)]
    assert _seen(pg_db, "SELECT mall_id, n, note FROM hours ORDER BY mall_id") == [
        (1, 1.0, None),
        (2, 2.5, "again"),
    ]
