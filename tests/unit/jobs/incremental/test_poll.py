"""`sync.jobs.incremental.poll`: a poll reads from its cursor less the lookback, writes what changed, moves
the cursor (never past the clocks' now), measures late arrivals, and starts a new scope a day
back."""

from __future__ import annotations

from typing import Any

import pytest

from sync.core.config import parse_config
from sync.jobs.incremental.poll import Poller, apply_feed_first, poll_types
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.staging import stage_resources
from sync.store import Mirror
from tests.support.jobfakes import NOW, FakeClient, deletion, ids, res, stamp, table

CONTACTS = catalogue.TYPES["contacts"]
STORES = catalogue.TYPES["stores"]


def _cursor(mirror: Mirror, name: str, scope: str, value: str | None = None) -> str | None:
    if value is not None:
        mirror.conn.execute(
            "INSERT OR REPLACE INTO _sync_cursors (type, scope, cursor) VALUES (?, ?, ?)",
            (name, scope, value),
        )
        mirror.conn.commit()
    row = mirror.conn.execute(
        "SELECT cursor FROM _sync_cursors WHERE type = ? AND scope = ?", (name, scope)
    ).fetchone()
    return None if row is None else str(row[0])


def _poller(client: FakeClient, mirror: Mirror, **kw: object) -> Poller:
    return Poller(client, mirror, page_size=100, overlap=5.0, **kw)  # type: ignore[arg-type]


def test_only_types_with_a_stamp_are_polled() -> None:
    names = [t.name for t in poll_types(list(catalogue.TYPES.values()))]
    assert "tags" not in names and "groups" not in names
    assert {"malls", "deals", "stores", "images"} <= set(names)


async def test_a_scope_without_a_cursor_asks_for_a_backfill(mirror: Mirror) -> None:
    with pytest.raises(LookupError) as missing:
        await _poller(FakeClient(), mirror).poll_scope(Scope(CONTACTS))
    assert str(missing.value) == "contacts [top] has no cursor yet; run `ccsync backfill` first"


async def test_a_poll_reads_from_the_cursor_less_the_overlap_and_moves_it(mirror: Mirror) -> None:
    table(mirror, "contacts", [(1, stamp(12))])
    _cursor(mirror, "contacts", "", stamp(20))
    client = FakeClient(now=NOW + 3600)
    client.serve(
        Scope(CONTACTS),
        [
            res(1, "contacts", stamp(12)),  # before the overlap: not asked for
            res(2, "contacts", stamp(16)),  # in the overlap, not held: late by 4 s
            res(3, "contacts", stamp(30)),
        ],
    )
    seen: list[tuple[str, int, float]] = []
    lags: list[str] = []
    poller = _poller(
        client, mirror, on_lateness=lambda *a: seen.append(a), on_lag=lambda t, p, s: lags.append(p)
    )
    result = await poller.poll_scope(Scope(CONTACTS))
    assert (result.rows, result.cursor, result.late) == (2, stamp(30), 1)
    assert ids(mirror, "contacts") == [1, 2, 3]
    assert _cursor(mirror, "contacts", "") == stamp(30)
    # The lookback grew to 1.5 x 4 s (decaying on the local clock since: rounded).
    assert [(k, n, round(lb, 3)) for k, n, lb in seen] == [("contacts", 1, 6.0)]
    assert lags == ["poll"]
    assert client.asked[0] == ("list", ("contacts", "", 1))


async def test_a_stamp_from_the_future_moves_the_cursor_only_to_now(mirror: Mirror) -> None:
    _cursor(mirror, "contacts", "", "2025-12-31T23:00:00.000Z")
    client = FakeClient()  # every clock at 2026-01-01T00:00:00Z
    client.serve(Scope(CONTACTS), [res(1, "contacts", "2030-01-01T00:00:00.000Z")])
    result = await _poller(client, mirror).poll_scope(Scope(CONTACTS))
    assert result.cursor == stamp(0)
    assert _cursor(mirror, "contacts", "") == stamp(0)


async def test_a_scope_never_polled_starts_a_day_before_now(mirror: Mirror) -> None:
    client = FakeClient()
    client.serve(Scope(STORES, 4), [])
    assert await _poller(client, mirror).poll_type(STORES, [4], 2) == 0
    # Nothing served yet on the stamps' scale: "now" is its lower bound, a day behind.
    assert _cursor(mirror, "stores", "mall=4") == "2025-12-30T00:00:00.000Z"


async def test_the_feed_first_applies_entries_or_says_none_without_a_cursor(
    mirror: Mirror,
) -> None:
    settings = parse_config(
        {"upstream": {"base_url": "http://u.test", "email": "a@b.c", "password": "x"}}
    )
    client = FakeClient(now=NOW + 3600)
    assert await apply_feed_first(client, mirror, settings, [CONTACTS]) is None  # type: ignore[arg-type]
    table(mirror, "contacts", [(1, stamp(1)), (2, stamp(1))])
    _cursor(mirror, "deletions", "", stamp(10))
    client.deletions = [deletion(1, "contacts", 1, stamp(20))]
    assert await apply_feed_first(client, mirror, settings, [CONTACTS]) == 1  # type: ignore[arg-type]
    assert ids(mirror, "contacts") == [2]
    assert _cursor(mirror, "deletions", "") == stamp(20)


async def test_a_row_stamped_the_moment_of_its_entry_is_decided_by_filter_id(
    mirror: Mirror,
) -> None:
    """Stamps of whole seconds: row 1 deleted and created again in the second of its entry,
    row 2 deleted in the second it was last changed. The entry cannot tell them apart; the
    deletions poll asks `filter[id]`: 1 is served and stays (a live row kept), 2 is not and
    goes, and neither is tombstoned."""
    table(mirror, "contacts", [(1, stamp(20)), (2, stamp(20)), (3, stamp(1))])
    _cursor(mirror, "deletions", "", stamp(10))
    client = FakeClient(now=NOW + 3600)
    client.serve(Scope(CONTACTS), [res(1, "contacts", stamp(20))])
    client.deletions = [
        deletion(1, "contacts", 1, stamp(20)),
        deletion(2, "contacts", 2, stamp(20)),
        deletion(3, "contacts", 3, stamp(20)),  # older: the entry decides, as before
    ]
    await _poller(client, mirror).poll_deletions({"contacts"})
    assert ids(mirror, "contacts") == [1]
    assert ("ids", ("", [1, 2])) in client.asked
    tombs = mirror.conn.execute("SELECT id FROM _sync_tombstones ORDER BY id").fetchall()
    assert [t[0] for t in tombs] == [3]
    assert _cursor(mirror, "deletions", "") == stamp(20)


def _store(rid: int, contacts: list[int]) -> dict[str, Any]:
    linkage = [{"type": "contacts", "id": str(c)} for c in contacts]
    row = res(rid, "stores", stamp(5), mall_id=1)
    return {**row, "relationships": {"contacts": {"data": linkage}}}


def _linked(mirror: Mirror) -> list[tuple[int, int]]:
    rows = mirror.conn.execute(
        "SELECT stores_id, contacts_id FROM stores_contacts ORDER BY 1, 2"
    ).fetchall()
    return [(int(s), int(c)) for s, c in rows]


async def test_a_row_created_again_before_the_feed_is_read_has_its_owners_asked_again(
    mirror: Mirror,
) -> None:
    """Contact 10 deleted and created again; a poll wrote the new row before the deletions
    poll read the entry, so the entry keeps it (newer). The deletion took contact 10 out of
    every store's linkage upstream, stamps unmoved: the stores that linked it are fetched
    again by `filter[id]` in their mall, once (the feed's overlap reads the entry again)."""
    mirror.write_staged(stage_resources(STORES, [_store(11, [10, 5]), _store(40, [10])], (), 1))
    mirror.write_staged(stage_resources(STORES, [_store(12, [5])], (), 1))
    table(mirror, "contacts", [(10, stamp(30)), (5, stamp(1))])
    _cursor(mirror, "deletions", "", stamp(10))
    client = FakeClient(now=NOW + 3600)
    in_mall = Scope(STORES, 1)
    client.serve(in_mall, [_store(11, [5]), _store(40, []), _store(12, [5])])
    client.serve(Scope(CONTACTS), [res(10, "contacts", stamp(30))])
    client.deletions = [deletion(1, "contacts", 10, stamp(20))]
    poller = _poller(client, mirror)
    await poller.poll_deletions({"contacts", "stores"})
    assert ids(mirror, "contacts") == [5, 10]  # the new row stays
    assert _linked(mirror) == [(11, 5), (12, 5)]
    assert ("ids", ("mall=1", [11, 40])) in client.asked  # 12 never linked 10: not asked
    asked = len(client.asked)
    await poller.poll_deletions({"contacts", "stores"})  # the overlap: the entry again
    assert [a for a in client.asked[asked:] if a[0] == "ids"] == []


def test_a_poll_s_requests_are_in_proportion_to_the_pages_its_rows_fill() -> None:
    """#45: health from progress. A walk that read 250 rows (3 pages) with one tie run may spend
    up to 2 x (3 + 1) + 4 x 2 = 16 requests; an idle poll 2 + 4 = 6. Past that the poll fails
    naming the listing, even when no page came back twice."""
    from sync.jobs.incremental.poll import in_proportion
    from sync.jobs.incremental.walks import PollResult

    assert in_proportion(PollResult(distinct=250, ties=1), 100) == 16
    assert in_proportion(PollResult(rows=900), 100) == 6  # re-reads are no rows of their own
    assert in_proportion(PollResult(distinct=250), 30) == 2 * (9 + 1) + 4


async def test_a_poll_that_makes_no_progress_fails_naming_the_listing(mirror: Mirror) -> None:
    """#45: an upstream answering the poll's filters with one page whatever is asked (a full
    page of one stamp): the walk ends within a few requests instead of looping at the budget,
    the rows read are written, the cursor stays (the rest was read in id order, not by stamp),
    and the poll fails with `NoProgressError` naming the listing, which is what health, status
    and `sync_walks_no_progress_total` report."""
    from sync.core.errors import NoProgressError

    _cursor(mirror, "contacts", "", stamp(0))
    client = FakeClient()
    rows = [res(i, "contacts", stamp(5)) for i in range(1, 101)]
    asked = 0

    async def same_page(request: Any, number: int, **_: Any) -> Any:
        nonlocal asked
        asked += 1
        assert asked <= 60, "a loop at the request budget"
        from tests.support.jobfakes import page

        return page(rows, number, 2)

    client.list_page = same_page  # type: ignore[method-assign]
    with pytest.raises(NoProgressError, match=r"the poll of contacts \[top\]"):
        await _poller(client, mirror).poll_scope(Scope(CONTACTS))
    assert asked <= 8
    assert len(ids(mirror, "contacts")) == 100
    assert _cursor(mirror, "contacts", "") == stamp(0)


async def test_a_deletions_poll_through_a_long_feed_is_in_proportion(mirror: Mirror) -> None:
    """A deletions poll that reads 250 entries, page after page, made progress: its requests
    are measured against the entries it read (as a row poll's against its rows), so it passes,
    where counting none allowed 6 requests and failed any feed longer than two pages (seen as
    `ccsync reconcile` exit 1 after a storm of 1,000 changes, #49 item 5)."""
    _cursor(mirror, "deletions", "", stamp(10))
    client = FakeClient(size=30, now=NOW + 3600)  # the strict profile's page bound: 9 pages
    client.deletions = [deletion(i, "contacts", 1000 + i, stamp(11 + i)) for i in range(250)]
    poller = Poller(client, mirror, page_size=30, overlap=5.0)  # type: ignore[arg-type]
    result = await poller.poll_deletions({"contacts"})
    assert result.distinct == 250
    assert result.requests > 6  # more than an idle poll's share: the case in question
    assert _cursor(mirror, "deletions", "") == stamp(260)
