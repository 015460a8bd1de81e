"""`sync.store.pg.linkwrite`: the three ways an owner's links are written end alike.

The contract tests of `test_links.py` hold the compared path (a feed to note in) and the new
owners' plain insert to SQLite's results. Here the unread path (`notes` None: a bulk load,
the server compares) is held to the compared one over generated lists, and shown to leave an
unchanged pair untouched (no new version, no lock) and to send no read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync.model import catalogue
from sync.store.pg import linkwrite
from tests.support.store_sides import SCHEMA, PostgresSide
from tests.support.store_units import staged

DEALS = catalogue.TYPES["deals"]
T0 = "2026-01-01T00:00:00.000Z"

#: Per owner (1..4), a list of related ids with repeats (1..6).
Lists = st.dictionaries(st.integers(1, 4), st.lists(st.integers(1, 6), max_size=6), max_size=4)


@pytest.fixture
def pg(pg_db: str) -> Iterator[PostgresSide]:
    s = PostgresSide(pg_db)
    # The tables, a feed and one row per owner (`LinkNotes` enters only rows that exist).
    s.page(
        *staged(
            "deals",
            [
                {
                    "id": str(i),
                    "type": "deals",
                    "attributes": {"title": "t", "updated_at": T0},
                    "relationships": {"images": {"data": [{"type": "images", "id": "1"}]}},
                }
                for i in range(1, 5)
            ],
        )
    )
    yield s
    s.close()


def _held(pg: PostgresSide) -> list[tuple[Any, ...]]:
    return pg.rows("SELECT deals_id, images_id, position FROM deals_images ORDER BY 1, 2")


def _expected(before: dict[int, list[int]], after: dict[int, list[int]]) -> list[tuple[int, ...]]:
    """The pairs the lists as served leave: each id once, where it first stands; a list whose
    order is the one held keeps its positions (SQLite compares members and order only); an
    owner not listed keeps its own."""

    def once(ids: list[int]) -> dict[int, int]:
        first: dict[int, int] = {}
        for pos, rel in enumerate(ids):
            first.setdefault(rel, pos)
        return first

    out = []
    for rid in sorted({*before, *after}):
        held, served = once(before.get(rid, [])), once(after.get(rid, before.get(rid, [])))
        kept = held if list(held) == list(served) else served
        out += [(rid, rel, pos) for rel, pos in kept.items()]
    return sorted(out)


def _write(pg: PostgresSide, lists: dict[int, list[int]], *, noted: bool) -> None:
    notes = pg.notes() if noted else None
    assert notes is not None or not noted
    linkwrite.write(pg.conn, SCHEMA, DEALS, {"images": list(lists.items())}, notes=notes)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=Lists, after=Lists)
def test_the_unread_write_ends_as_the_compared_one(
    pg: PostgresSide, before: dict[int, list[int]], after: dict[int, list[int]]
) -> None:
    results = []
    for noted in (True, False):
        pg.run("DELETE FROM deals_images")
        _write(pg, before, noted=True)
        _write(pg, after, noted=noted)
        results.append(_held(pg))
    assert results[0] == results[1] == _expected(before, after)


def test_an_unchanged_list_is_neither_rewritten_nor_locked_and_a_move_is_one_update(
    pg: PostgresSide,
) -> None:
    pg.run("DELETE FROM deals_images")
    _write(pg, {1: [5, 6, 7], 2: [8]}, noted=True)
    versions = pg.rows("SELECT deals_id, images_id, xmin::text, xmax::text FROM deals_images")
    _write(pg, {1: [5, 6, 7], 2: [8]}, noted=False)
    assert pg.rows("SELECT deals_id, images_id, xmin::text, xmax::text FROM deals_images") == (
        versions
    )
    assert all(xmax == "0" for *_, xmax in versions)
    _write(pg, {1: [5, 7, 6], 2: []}, noted=False)
    assert _held(pg) == [(1, 5, 0), (1, 6, 2), (1, 7, 1)]
    moved = {
        (o, r): xmin
        for o, r, xmin, _ in pg.rows(
            "SELECT deals_id, images_id, xmin::text, xmax::text FROM deals_images"
        )
    }
    before = {(o, r): xmin for o, r, xmin, _ in versions}
    assert moved[1, 5] == before[1, 5]
    assert moved[1, 6] != before[1, 6] and moved[1, 7] != before[1, 7]


def test_the_unread_write_sends_no_read(pg: PostgresSide) -> None:
    """In a bulk load's pipeline a read waits for the server: no statement of the unread
    path returns rows."""
    pg.run("DELETE FROM deals_images")
    _write(pg, {1: [5, 6]}, noted=True)
    sent: list[bool] = []  # per statement: whether it returned no rows
    execute = pg.conn.execute

    def spy(query: Any, params: Any = None, **kw: Any) -> Any:
        cur = execute(query, params, **kw)
        sent.append(cur.description is None)
        return cur

    pg.conn.execute = spy  # type: ignore[method-assign]
    try:
        _write(pg, {1: [6, 9], 2: [5]}, noted=False)
    finally:
        pg.conn.execute = execute  # type: ignore[method-assign]
    assert sent and all(sent)
    assert _held(pg) == [(1, 6, 0), (1, 9, 1), (2, 5, 0)]


def test_int_array_is_the_text_of_a_bigint_array(pg: PostgresSide) -> None:
    for values in ([], [1], [3, -2, 2**62]):
        text = linkwrite.int_array(values)
        assert pg.rows("SELECT ?::bigint[]", text) == [(values,)]
