"""`sync.jobs.malls.touchedmalls`: the mall routes asked for the rows the change feed says changed,
by `filter[id]` (or walked whole where that costs no more), once per change; nothing asked
when nothing changed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson

from sync.jobs.malls.mallroutes import FOLLOWED_KEY, META_KEY, route_scope
from sync.jobs.malls.touchedmalls import TouchedMalls
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, res, stamp, table


class RoutesClient(FakeClient):
    """Each mall's contacts route serves `routes[mall]`; `ignore_ids`: `filter[id]` ignored
    on the mall routes (the whole route's first page answered)."""

    def __init__(self, routes: dict[int, list[int]], *, ignore_ids: bool = False) -> None:
        super().__init__(size=2)
        self.settings = SimpleNamespace(concurrency=2)
        self.ignore_ids = ignore_ids
        for mall, ids in routes.items():
            self.serve(route_scope("contacts", mall), [res(i, "contacts", stamp(i)) for i in ids])

    async def fetch_ids(self, scope: Any, wanted: Any) -> Any:
        if self.ignore_ids:
            self.asked.append(("ids", (scope.key, sorted(int(i) for i in wanted))))
            return await self.list_page(scope, 1)
        return await super().fetch_ids(scope, wanted)


def _mirror(mirror: Mirror, held: dict[int, list[int]]) -> None:
    """Contacts 1-9, `malls_contacts` as `held`, listed from the routes, followed through now."""
    table(mirror, "malls", [(1, stamp(1)), (2, stamp(2))])
    table(mirror, "contacts", [(i, stamp(i)) for i in range(1, 12)])
    for mall, ids in held.items():
        mirror.table("contacts").replace_mall_links(mall, ids)
    mirror.meta.set(META_KEY, orjson.dumps({"contacts": "route"}).decode())
    mirror.meta.set(FOLLOWED_KEY, orjson.dumps({"contacts": mirror.changes.last()}).decode())


def _changed(mirror: Mirror, *ids: int, op: str = "upsert") -> None:
    """The change feed gets an entry per id (as a write of a new version makes one)."""
    mirror.conn.executemany(
        "INSERT INTO _sync_changes (type, id, op, updated_at, at) VALUES ('contacts', ?, ?, ?, ?)",
        [(i, op, stamp(50), stamp(50)) for i in ids],
    )
    mirror.conn.commit()


def _held(mirror: Mirror) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for mall, rid in mirror.conn.execute(
        "SELECT malls_id, contacts_id FROM malls_contacts ORDER BY 1, position"
    ):
        out.setdefault(mall, []).append(rid)
    return out


async def test_nothing_changed_asks_nothing(mirror: Mirror) -> None:
    """Before: every poll that was served a row (the lookback serves the one at the cursor
    again) walked every mall's route."""
    client = RoutesClient({1: [1, 2, 3, 4, 5], 2: [6, 7, 8, 9]})
    _mirror(mirror, {1: [1, 2, 3, 4, 5], 2: [6, 7, 8, 9]})
    touched = TouchedMalls(client, mirror)
    assert await touched.follow("contacts", [1, 2]) == 0
    _changed(mirror, 3, op="links")  # the routes' own writes are no change of the row
    assert await touched.follow("contacts", [1, 2]) == 0
    assert client.asked == []


async def test_a_changed_row_is_asked_of_every_mall_once(mirror: Mirror) -> None:
    """Contact 3 left mall 1 for mall 2: one `filter[id]` request a mall, then nothing more."""
    client = RoutesClient({1: [1, 2, 4, 5, 6], 2: [3, 7, 8, 9, 10]})
    _mirror(mirror, {1: [1, 2, 3, 4, 5, 6], 2: [7, 8, 9, 10, 11]})
    _changed(mirror, 3)
    touched = TouchedMalls(client, mirror)
    assert await touched.follow("contacts", [1, 2]) == 1
    assert sorted(client.asked) == [("ids", ("mall=1", [3])), ("ids", ("mall=2", [3]))]
    assert _held(mirror) == {1: [1, 2, 4, 5, 6], 2: [3, 7, 8, 9, 10, 11]}  # the rest stays
    client.asked.clear()
    assert await touched.follow("contacts", [1, 2]) == 0  # followed: not asked again
    assert client.asked == []


async def test_a_small_route_or_one_ignoring_filter_id_is_walked_whole(mirror: Mirror) -> None:
    client = RoutesClient({1: [1], 2: [3, 7, 8, 9, 10]}, ignore_ids=True)
    _mirror(mirror, {1: [1, 2], 2: [7, 8, 9, 10, 11]})
    _changed(mirror, 3)
    assert await TouchedMalls(client, mirror).follow("contacts", [1, 2]) == 1
    # Mall 1 holds 2 rows: one page, no dearer than a `filter[id]` request; mall 2's answer
    # to `filter[id]` lists rows not asked: its route is walked.
    assert ("ids", ("mall=1", [3])) not in client.asked and ("ids", ("mall=2", [3])) in client.asked
    assert _held(mirror) == {1: [1], 2: [3, 7, 8, 9, 10]}


async def test_no_number_followed_walks_every_route_once(mirror: Mirror) -> None:
    client = RoutesClient({1: [1, 2], 2: [3]})
    _mirror(mirror, {})
    mirror.meta.set(FOLLOWED_KEY, "{}")
    touched = TouchedMalls(client, mirror)
    await touched.follow("contacts", [1, 2])
    assert _held(mirror) == {1: [1, 2], 2: [3]}
    assert touched.routes.followed() == {"contacts": 0}  # the feed's number as the walk began
    client.asked.clear()
    await touched.follow("contacts", [1, 2])
    assert client.asked == []


async def test_types_not_listed_from_the_routes_are_left_alone(mirror: Mirror) -> None:
    client = RoutesClient({1: [1]})
    _mirror(mirror, {1: [1]})
    mirror.meta.set(META_KEY, orjson.dumps({"contacts": "include"}).decode())
    _changed(mirror, 1)
    assert await TouchedMalls(client, mirror).follow("contacts", [1]) == 0
    assert client.asked == []
