"""`sync.store.mirror`: the `Mirror` in sqlite-utils' `Database` shape, on real SQLite files.

It owns the connection and the page writes, hands out table handles, and holds its bookkeeping
as composed parts: its public surface stays small and none of it forwards in one line.
"""

from __future__ import annotations

import ast
import inspect
import sqlite3
import textwrap
from pathlib import Path

import pytest

from sync.model import catalogue
from sync.pipeline.staging import stage_resources
from sync.store import Mirror, PageCheckpoint, TypeTable
from sync.store.backfills import Backfills
from sync.store.changes import ChangeFeed
from sync.store.groupcommit import GroupCommit
from sync.store.hours import Hours
from sync.store.indexes import EndPhase
from sync.store.jobrecords import JobRecords
from sync.store.malls import Malls
from sync.store.meta import Cursors, Meta
from sync.store.runs import Runs
from sync.store.status import TypeStatuses
from sync.store.values import ValueNotes
from tests.support.pages import DEALS, res, write_page

#: The most public names `Mirror` may expose (issue #41: a facade that forwards is a smell).
MOST = 25


def public_names() -> list[str]:
    return [n for n, _ in inspect.getmembers(Mirror) if not n.startswith("_")]


def test_the_mirror_exposes_at_most_25_public_names() -> None:
    """Every public method and property counts: per-type operations live on `TypeTable`,
    bookkeeping on the parts, so the class cannot grow back into a facade unseen."""
    names = public_names()
    assert len(names) <= MOST, f"{len(names)} public names on Mirror: {names}"
    assert "table" in names and "write_staged" in names


def test_no_public_method_of_the_mirror_is_a_one_line_forward() -> None:
    """A method whose body (docstring aside) is one `return x.f(...)` or `x.f(...)` call adds
    nothing a caller could not ask the part for: none remains on `Mirror`."""
    forwards = []
    for name in public_names():
        attr = inspect.getattr_static(Mirror, name)
        func = getattr(attr, "__func__", attr)
        if isinstance(attr, property):
            func = attr.fget
        if not inspect.isfunction(func):
            continue
        node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
        assert isinstance(node, ast.FunctionDef)
        body = [
            s
            for s in node.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        if len(body) == 1 and isinstance(body[0], ast.Return | ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Call) and name != "table":
                forwards.append(name)
    assert not forwards, f"one-line forwards on Mirror: {forwards}"


def test_the_parts_are_composed_not_inherited(mirror: Mirror) -> None:
    """Bookkeeping is held, each part on the mirror's own connection; no mixin is a base."""
    assert Mirror.__bases__ == (object,)
    parts = {
        "meta": Meta,
        "cursors": Cursors,
        "backfills": Backfills,
        "runs": Runs,
        "jobs": JobRecords,
        "types": TypeStatuses,
        "values": ValueNotes,
        "changes": ChangeFeed,
        "indexes": EndPhase,
        "group": GroupCommit,
        "hours": Hours,
        "malls": Malls,
    }
    for name, kind in parts.items():
        assert isinstance(getattr(mirror, name), kind), name
    assert mirror.meta.conn is mirror.conn and mirror.jobs.conn is mirror.conn
    assert mirror.types.schema is mirror.schema


def test_table_takes_a_name_or_a_resource_type(mirror: Mirror) -> None:
    by_name, by_type = mirror.table("deals"), mirror.table(DEALS)
    assert isinstance(by_name, TypeTable) and isinstance(by_type, TypeTable)
    assert by_name.name == by_type.name == "deals" and by_name.rtype is DEALS


def test_a_page_and_its_checkpoint_commit_together(mirror: Mirror) -> None:
    """`write_staged` writes the rows and the backfill checkpoint in one transaction: a page
    that fails leaves neither."""
    mirror.backfills.start("deals", "", page_size=2, started_at="t0")
    write_page(mirror, DEALS, [res(1), res(2)], checkpoint=PageCheckpoint("deals", "", 1, 3))
    state = mirror.backfills.state("deals", "")
    assert state is not None and state.pages_done == frozenset({1}) and state.last == 3
    assert mirror.table("deals").count() == 2
    batches = stage_resources(DEALS, [res(3)])
    mirror.conn.execute(
        "CREATE TRIGGER no_three BEFORE INSERT ON deals WHEN NEW.id = 3 "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    with pytest.raises(sqlite3.IntegrityError):
        mirror.write_staged(batches, checkpoint=PageCheckpoint("deals", "", 2, 3))
    state = mirror.backfills.state("deals", "")
    assert state is not None and state.pages_done == frozenset({1})
    assert list(mirror.table("deals").ids()) == [1, 2]


def test_a_delete_through_the_table_makes_the_memo_forget_the_row(mirror: Mirror) -> None:
    """The writer's memo of included rows skips a copy it last wrote; a row deleted through a
    table handle must be written again when it is next included."""
    tag = {"id": "5", "type": "tags", "attributes": {"name": "a"}}
    linked = res(1)
    linked["relationships"] = {"tags": {"data": [{"type": "tags", "id": "5"}]}}
    write_page(mirror, DEALS, [linked], [tag])
    assert mirror.table("tags").delete([5]) == 1
    write_page(mirror, DEALS, [linked], [tag])
    assert mirror.table("tags").get(5) is not None


def test_repair_compares_then_writes(mirror: Mirror) -> None:
    """`repair` reports a row changed under the same stamp and writes the served copy."""
    write_page(mirror, DEALS, [res(1)])
    [fixed] = mirror.repair(stage_resources(DEALS, [res(1, title="other")]))
    assert (fixed.type, fixed.id, fixed.what) == ("deals", 1, ("title",))
    assert mirror.table("deals").get(1)["title"] == "other"  # type: ignore[index]


def test_close_commits_an_open_group_and_releases_the_file(tmp_path: Path) -> None:
    m = Mirror.open(tmp_path / "m.db")
    m.group.start(100)
    write_page(m, DEALS, [res(1)])
    assert m.conn.in_transaction
    m.close()
    again = Mirror.open(tmp_path / "m.db")
    assert again.table("deals").count() == 1
    again.close()


def test_the_parts_read_a_mirror_opened_read_only(tmp_path: Path) -> None:
    """A reader (`ccsync status`) asks the same parts of a read-only open."""
    m = Mirror.open(tmp_path / "m.db")
    write_page(m, DEALS, [res(1)])
    m.meta.set("k", "v")
    m.types.record("deals", ok=True, at="t1")
    m.close()
    ro = Mirror.open(tmp_path / "m.db", readonly=True)
    try:
        assert ro.meta.get("k") == "v"
        assert [s.type_name for s in ro.types.lines()] == ["deals"]
        assert ro.table("deals").count() == 1
        assert ro.changes.last() >= 1 and ro.values.faults() == {}
    finally:
        ro.close()


def test_every_listable_type_gets_a_table_handle(mirror: Mirror) -> None:
    for name in catalogue.LISTABLE:
        assert mirror.table(name).count() == 0
