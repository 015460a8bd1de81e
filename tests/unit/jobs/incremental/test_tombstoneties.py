"""`sync.jobs.incremental.tombstoneties`: a copy stamped its tombstone's very moment is left out by the page
write and noted; `filter[id]` decides: served, it is written and the tombstone lifted; not
served, the tombstone holds. Asked in the malls that listed it; a failure notes it again."""

from __future__ import annotations

import pytest

from sync.core.errors import ListingMissingError
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.staging import stage_resources
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, res, stamp

ARTICLES = catalogue.TYPES["articles"]
STORES = catalogue.TYPES["stores"]


def _ids(mirror: Mirror, table: str) -> list[int]:
    return [int(r[0]) for r in mirror.conn.execute(f"SELECT id FROM [{table}] ORDER BY id")]


def _deleted_at(mirror: Mirror, moment: str, *ids: int) -> None:
    """Articles `ids` mirrored older than `moment`, then deleted by feed entries of `moment`."""
    mirror.write_staged(stage_resources(ARTICLES, [res(i, "articles", stamp(10)) for i in ids]))
    mirror.table("articles").apply_feed(dict.fromkeys(ids, moment))


async def test_a_copy_tied_with_its_tombstone_served_by_filter_id_is_written_again(
    mirror: Mirror,
) -> None:
    """Articles 4 and 5 deleted at second 30 (whole seconds), and copies of both stamped second
    30 listed later: 4 was created again in that second (filter[id] serves it), 5 is the old
    row changed in the second it was deleted (filter[id] does not). Before this rule a tombstone
    refused a copy stamped its very moment: article 4, live upstream, was lost for good."""
    _deleted_at(mirror, stamp(30), 4, 5)
    mirror.write_staged(
        stage_resources(ARTICLES, [res(4, "articles", stamp(30)), res(5, "articles", stamp(30))])
    )
    assert _ids(mirror, "articles") == []  # left out by the page write, not refused for good
    client = FakeClient()
    client.serve(Scope(ARTICLES), [res(4, "articles", stamp(30), title="again")])
    ties = TombstoneTies(Evidence(client, mirror))
    assert await ties.settle(["articles"]) == 1
    assert _ids(mirror, "articles") == [4]
    assert sorted(mirror.table("articles").tombstones([4, 5])) == [5]  # 4 lifted, 5 holds
    mirror.write_staged(stage_resources(ARTICLES, [res(5, "articles", stamp(30))]))
    assert _ids(mirror, "articles") == [4]  # 5's tie noted again, never written blind
    assert await ties.settle(["articles"]) == 1 and _ids(mirror, "articles") == [4]
    assert await ties.settle(["articles"]) == 0  # nothing noted: nothing asked


async def test_copies_older_than_the_window_stay_refused_and_are_never_asked(
    mirror: Mirror,
) -> None:
    _deleted_at(mirror, stamp(30), 4)
    mirror.write_staged(stage_resources(ARTICLES, [res(4, "articles", stamp(28))]))
    client = FakeClient()
    ties = TombstoneTies(Evidence(client, mirror))
    assert await ties.settle(["articles"]) == 0 and client.asked == []
    mirror.write_staged(stage_resources(ARTICLES, [res(4, "articles", stamp(32))]))
    assert _ids(mirror, "articles") == [4]  # newer than the window: created again, lifted


async def test_a_copy_stamped_a_second_before_its_tombstone_is_asked_not_lost(
    mirror: Mirror,
) -> None:
    """#46: a row deleted (entry at second 30) and created again at once by an app server
    whose clock is behind, or that keeps whole seconds: stamped second 29, before its entry.
    Refused by the tombstone it was a live row lost for good; within the window it is asked,
    and served, written with the tombstone lifted."""
    _deleted_at(mirror, stamp(30), 4)
    mirror.write_staged(stage_resources(ARTICLES, [res(4, "articles", stamp(29), title="again")]))
    assert _ids(mirror, "articles") == []  # held for filter[id]
    client = FakeClient()
    client.serve(Scope(ARTICLES), [res(4, "articles", stamp(29), title="again")])
    ties = TombstoneTies(Evidence(client, mirror))
    assert await ties.settle(["articles"]) == 1
    assert _ids(mirror, "articles") == [4] and mirror.table("articles").tombstones([4]) == {}


async def test_a_mall_scoped_tie_is_asked_in_the_malls_that_listed_it(mirror: Mirror) -> None:
    mirror.write_staged(stage_resources(STORES, [res(11, "stores", stamp(10))], (), 2))
    mirror.table("stores").apply_feed({11: stamp(30)})
    mirror.write_staged(stage_resources(STORES, [res(11, "stores", stamp(30))], (), 3))
    client = FakeClient()
    client.serve(Scope(STORES, 3), [res(11, "stores", stamp(30))])
    ties = TombstoneTies(Evidence(client, mirror))
    assert await ties.settle(["stores"]) == 1
    assert client.asked == [("ids", (Scope(STORES, 3).key, [11]))]
    assert _ids(mirror, "stores") == [11] and mirror.table("stores").malls_of(11) == [3]


async def test_a_failure_notes_the_ties_again_for_the_next_run(mirror: Mirror) -> None:
    mirror.write_staged(stage_resources(STORES, [res(11, "stores", stamp(10))], (), 3))
    mirror.table("stores").apply_feed({11: stamp(30)})
    mirror.write_staged(stage_resources(STORES, [res(11, "stores", stamp(30))], (), 3))
    client = FakeClient()
    client.lost_listings = {3}
    client.malls = {3}  # `GET /malls/3` serves the mall: the listing's 404 is a failure
    ties = TombstoneTies(Evidence(client, mirror))
    with pytest.raises(ListingMissingError):
        await ties.settle(["stores"])
    client.lost_listings = set()
    client.serve(Scope(STORES, 3), [res(11, "stores", stamp(30))])
    assert await ties.settle(["stores"]) == 1
    assert _ids(mirror, "stores") == [11]


async def test_a_tombstone_a_copy_contradicts_a_proof_cycle_later_is_asked_and_widens_the_window(
    mirror: Mirror,
) -> None:
    """#46: a copy stamped 20 s before its tombstone is refused (a page made before the
    deletion). Served again an hour later (no lagging replica lags that long), the tombstone
    is doubted: `filter[id]` serves the row, it is written, and the window around entries
    grows to cover that gap (kept in the mirror), so such a row is asked at once next time."""
    from sync.store.deletions import CONTRADICTED_AFTER_SECONDS, WINDOW_KEY

    _deleted_at(mirror, stamp(30), 4)
    deletions = mirror.table("articles").deletions
    now = [1000.0]
    deletions.clock = lambda: now[0]
    copy = res(4, "articles", stamp(10), title="alive")
    mirror.write_staged(stage_resources(ARTICLES, [copy]))
    client = FakeClient()
    client.serve(Scope(ARTICLES), [copy])
    ties = TombstoneTies(Evidence(client, mirror))
    assert await ties.settle(["articles"]) == 0 and _ids(mirror, "articles") == []  # refused
    now[0] += CONTRADICTED_AFTER_SECONDS
    mirror.write_staged(stage_resources(ARTICLES, [copy]))
    assert await ties.settle(["articles"]) == 1
    assert _ids(mirror, "articles") == [4]
    assert deletions.window == 30.0  # 20 s found, with a margin
    assert mirror.meta.get(WINDOW_KEY) == "30.0"
