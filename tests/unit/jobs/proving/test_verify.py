"""`sync.jobs.proving.verify`: whole copies repair a row changed under an equal stamp, rows not served
are left to the reconcile; the rolling step spends its budget and resumes where it stopped."""

from __future__ import annotations

import orjson

from sync.jobs.proving.verify import POSITION_KEY, Verifier
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.store import Mirror
from sync.store.repair import Repair
from tests.support.jobfakes import FakeClient, res, stamp

CONTACTS = catalogue.TYPES["contacts"]
DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]


def _contacts(mirror: Mirror, n: int) -> None:
    mirror.conn.execute(
        "CREATE TABLE contacts (id INTEGER PRIMARY KEY, updated_at TEXT, created_at TEXT, name TEXT)"
    )
    mirror.conn.executemany(
        "INSERT INTO contacts VALUES (?, ?, ?, ?)",
        [(i, stamp(1), stamp(1), f"c{i}") for i in range(1, n + 1)],
    )
    mirror.conn.commit()


def _position(mirror: Mirror) -> dict[str, object] | None:
    row = mirror.conn.execute(
        "SELECT value FROM _sync_meta WHERE key = ?", (POSITION_KEY,)
    ).fetchone()
    return None if row is None or row[0] is None else orjson.loads(row[0])


async def test_a_row_changed_under_its_stamp_is_repaired_and_one_not_served_is_left(
    mirror: Mirror,
) -> None:
    _contacts(mirror, 3)
    client = FakeClient()
    client.serve(
        Scope(CONTACTS),
        [
            res(1, "contacts", stamp(1), name="c1"),
            res(2, "contacts", stamp(1), name="renamed"),  # same stamp, new content
        ],
    )
    repairs: list[Repair] = []
    report = await Verifier(client, mirror, on_repair=repairs.append).run_all([CONTACTS], [])
    assert (report.rows, report.requests, report.repairs, report.cycle_done) == (
        3,
        1,
        {"contacts": 1},
        True,
    )
    assert repairs == [Repair("contacts", 2, ("name",))]
    rows = mirror.conn.execute("SELECT id, name FROM contacts ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [(1, "c1"), (2, "renamed"), (3, "c3")]  # 3: the reconcile's
    assert _position(mirror) is None  # a whole cycle moves no rolling position


async def test_the_rolling_step_keeps_its_place_and_ends_the_cycle(mirror: Mirror) -> None:
    _contacts(mirror, 150)
    client = FakeClient()
    verifier = Verifier(client, mirror)
    first = await verifier.step([CONTACTS], [], budget=1)
    assert (first.rows, first.requests, first.cycle_done) == (100, 1, False)
    assert _position(mirror) is not None
    assert {k: v for k, v in _position(mirror).items() if k != "started_at"} == {  # type: ignore[union-attr]
        "type": "contacts",
        "mall": None,
        "after": 100,
    }
    second = await verifier.step([CONTACTS], [], budget=5)
    assert (second.rows, second.requests, second.cycle_done) == (50, 1, True)
    assert [a for k, a in client.asked] == [("", list(range(1, 101))), ("", list(range(101, 151)))]
    assert _position(mirror) is None
    # Other types configured: a kept position of a type no longer verified starts over.
    mirror.conn.execute(
        "INSERT OR REPLACE INTO _sync_meta VALUES (?, ?)",
        (
            POSITION_KEY,
            orjson.dumps({"type": "events", "mall": None, "after": 9, "started_at": ""}).decode(),
        ),
    )
    mirror.conn.commit()
    again = await verifier.step([CONTACTS], [], budget=1)
    assert again.rows == 100 and client.asked[-1] == ("ids", ("", list(range(1, 101))))


async def test_no_types_is_a_cycle_done_and_the_cost_counts_scopes_and_batches(
    mirror: Mirror,
) -> None:
    _contacts(mirror, 150)
    mirror.conn.execute("CREATE TABLE deals (id INTEGER PRIMARY KEY, updated_at TEXT)")
    mirror.conn.executemany("INSERT INTO deals VALUES (?, NULL)", [(i,) for i in range(1, 11)])
    mirror.conn.commit()
    verifier = Verifier(FakeClient(), mirror)
    assert (await verifier.step([], [], budget=10)).cycle_done is True
    # contacts: 2 batches of 100; deals: 1 batch in each of 3 visibilities.
    assert verifier.cost([CONTACTS, DEALS], []) == 2 + 3
    assert verifier.cost([], []) == 1  # never zero: a cycle always ticks
    # A mall-scoped type with no mall: nothing to fetch.
    assert (await verifier.run_all([STORES], [])).rows == 0
