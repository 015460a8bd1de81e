"""`sync.jobs.proving.proofdiff`: a unit's completed listing against the mirror: missed creations and
changes fetched, deletions only when the canaries prove the answers, else left unresolved."""

from __future__ import annotations

from sync.jobs.evidence import Evidence
from sync.jobs.proving.proofdiff import CANARIES, UnitDiff, scope_key
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.staging import stage_resources
from sync.store import Mirror
from sync.store.proof import ProofBook
from tests.support.jobfakes import FakeClient, ids, res, stamp, table

ARTICLES = catalogue.TYPES["articles"]
SCOPE = Scope(ARTICLES)


def _diff(
    client: FakeClient, mirror: Mirror, **kw: object
) -> tuple[UnitDiff, ProofBook, list[tuple[str, str, int]]]:
    book = ProofBook(mirror.conn)
    told: list[tuple[str, str, int]] = []
    diff = UnitDiff(
        client,
        mirror,
        Evidence(client, mirror),
        book,
        max_delete_share=0.5,
        on_repair=lambda t, kind, n: told.append((t, kind, n)),
        **kw,  # type: ignore[arg-type]
    )
    return diff, book, told


async def test_missed_rows_are_fetched_and_confirmed_deletions_removed(mirror: Mirror) -> None:
    table(mirror, "articles", [(1, stamp(5)), (2, stamp(5)), (3, stamp(5)), (4, stamp(5))])
    client = FakeClient()
    served = [
        res(1, "articles", stamp(5)),
        res(2, "articles", stamp(9)),
        res(6, "articles", stamp(7)),
    ]
    client.serve(SCOPE, served)
    diff, book, told = _diff(client, mirror)
    book.add(scope_key("articles", 0), [(1, stamp(5)), (2, stamp(9)), (6, stamp(7))])
    out = await diff.diff("articles", [SCOPE])
    assert out.repaired == {"missed_creation": 1, "missed_change": 1, "missed_deletion": 2}
    assert told == [
        ("articles", "missed_creation", 1),
        ("articles", "missed_change", 1),
        ("articles", "missed_deletion", 2),
    ]
    assert (out.unresolved, out.why) == (0, None)
    assert ids(mirror, "articles") == [1, 2, 6]
    # The confirmation asked the absent ids with the two most recently changed as canaries.
    assert client.asked[-1] == ("ids", ("", [2, 3, 4, 6]))
    assert out.requests == 2  # one fetch of the stale, one confirmation
    assert CANARIES == 2


async def test_an_answer_without_its_canaries_deletes_nothing(mirror: Mirror) -> None:
    """An upstream answering empty to every `filter[id]`: the canaries, known alive, come back
    gone too, so nothing is deleted and the rows stay unresolved with the reason."""
    table(mirror, "articles", [(1, stamp(5)), (2, stamp(5)), (3, stamp(5))])
    client = FakeClient()  # serves nothing to filter[id]
    diff, book, told = _diff(client, mirror)
    book.add(scope_key("articles", 0), [(1, stamp(5)), (2, stamp(5))])
    out = await diff.diff("articles", [SCOPE])
    assert ids(mirror, "articles") == [1, 2, 3]
    assert out.repaired == {} and told == []
    assert out.unresolved == 1
    assert out.why == (
        "1 of 3 rows absent from the listing could not be confirmed gone (a canary known alive "
        "was answered gone too); nothing was deleted"
    )


async def test_an_empty_listing_has_no_canary_and_force_deletes_without_one(
    mirror: Mirror,
) -> None:
    table(mirror, "articles", [(i, stamp(5)) for i in range(1, 13)])
    client = FakeClient()
    diff, _, _ = _diff(client, mirror)
    out = await diff.diff("articles", [SCOPE])
    assert out.unresolved == 12
    assert out.why == (
        "12 of 12 rows absent from the listing could not be confirmed gone (the upstream listed "
        "none: no canary to prove its answers); the mass-delete guard holds them; nothing was "
        "deleted"
    )
    assert len(ids(mirror, "articles")) == 12
    forced, _, _ = _diff(client, mirror, force=True)
    out = await forced.diff("articles", [SCOPE])
    assert out.repaired == {"missed_deletion": 12} and out.unresolved == 0
    assert ids(mirror, "articles") == []


STORES = catalogue.TYPES["stores"]
IN_MALL_1 = Scope(STORES, 1)


def _stores_in_mall_1(mirror: Mirror, rids: list[int]) -> None:
    rows = [res(i, "stores", stamp(5), mall_id=1) for i in rids]
    mirror.write_staged(stage_resources(STORES, rows, (), 1))


def _members(mirror: Mirror) -> list[int]:
    return [r[0] for r in mirror.conn.execute("SELECT stores_id FROM malls_stores ORDER BY 1")]


async def test_a_row_leaves_a_mall_once_filter_id_there_agrees_with_its_canaries(
    mirror: Mirror,
) -> None:
    _stores_in_mall_1(mirror, [1, 2, 3])
    client = FakeClient()
    client.serve(IN_MALL_1, [res(1, "stores", stamp(5)), res(2, "stores", stamp(5))])
    diff, book, told = _diff(client, mirror)
    unit = "stores@1"
    book.add(scope_key(unit, 0), [(1, stamp(5)), (2, stamp(5))])
    out = await diff.diff(unit, [IN_MALL_1])
    assert client.asked[-1] == ("ids", ("mall=1", [1, 2, 3]))  # 3, with 1 and 2 as canaries
    assert out.repaired == {"membership": 1} and out.unresolved == 0
    assert _members(mirror) == [1, 2] and ids(mirror, "stores") == [1, 2, 3]  # the row stays


async def test_a_mall_answering_its_canaries_gone_keeps_the_membership(mirror: Mirror) -> None:
    """An upstream answering empty to every `filter[id]` in the mall: the canaries, listed a
    moment ago, come back gone too, so no membership is removed and the unit is unresolved."""
    _stores_in_mall_1(mirror, [1, 2, 3])
    client = FakeClient()  # serves nothing to filter[id]
    diff, book, told = _diff(client, mirror)
    unit = "stores@1"
    book.add(scope_key(unit, 0), [(1, stamp(5)), (2, stamp(5))])
    out = await diff.diff(unit, [IN_MALL_1])
    assert _members(mirror) == [1, 2, 3] and told == []
    assert out.unresolved == 1
    assert out.why == (
        "1 rows absent from mall 1's listing could not be confirmed to have left it (a canary "
        "known alive was answered gone too); their memberships stay"
    )
    emptied, _, _ = _diff(client, mirror)  # a mall that lists nothing: no canary to ask
    out = await emptied.diff("stores@1/empty", [IN_MALL_1])
    assert out.repaired == {"membership": 3} and _members(mirror) == []


async def test_a_row_the_mirror_refuses_is_unresolved_with_why_never_repaired(
    mirror: Mirror,
) -> None:
    """#46: the listing serves article 7, which a tombstone dated after every copy refuses.
    Before, the proof logged `proof.repaired missed_creation` and counted it while the mirror
    held nothing; now it is unresolved, naming the tombstone, and no repair is told."""
    table(mirror, "articles", [(1, stamp(5))])
    mirror.conn.execute(
        "INSERT INTO _sync_tombstones (type, id, deleted_at, source) VALUES (?, ?, ?, 'feed')",
        ("articles", 7, stamp(50)),
    )
    mirror.conn.commit()
    client = FakeClient()
    client.serve(SCOPE, [res(1, "articles", stamp(5)), res(7, "articles", stamp(20))])
    diff, book, told = _diff(client, mirror)
    book.add(scope_key("articles", 0), [(1, stamp(5)), (7, stamp(20))])
    out = await diff.diff("articles", [SCOPE])
    assert ids(mirror, "articles") == [1]
    assert out.repaired == {} and told == []
    assert out.unresolved == 1
    assert out.why is not None and "tombstone of 2026-01-01T00:00:50.000Z" in out.why
