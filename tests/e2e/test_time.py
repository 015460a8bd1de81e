"""Time is evidence (#37): "now" learned from the stamps served, lateness measured, tie runs read whole."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.channel.clock import FALLBACK_LAG, UpstreamClock
from sync.emulator import Emulator
from sync.emulator.hard import Hard
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.poll import Poller
from sync.jobs.malls.hours import MallHours
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.model.stamps import iso_ms
from sync.readers.status import lateness_lines, status_data, status_lines
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.settings import settings_for

ARTICLES = catalogue.TYPES["articles"]
T0 = 1_800_000_000.0


# -- the clock -------------------------------------------------------------------------------


def test_the_clock_is_a_lower_bound_of_the_stamps_now_kept_and_has_a_fallback() -> None:
    """offset = max(stamp - receipt): a stamp served 90 s behind teaches -90, a late commit (an
    old stamp read now) lowers nothing, a stamp far in the future teaches nothing; the state
    survives a restart through `_sync_meta`; with nothing seen, now is the Date clock a day back."""
    local = [T0]
    meta: dict[str, str] = {}
    clock = UpstreamClock(local=lambda: local[0], date_offset=lambda: 0.0)
    assert clock.offset is None
    assert clock.now() == iso_ms(T0 - FALLBACK_LAG)
    clock.keep(meta.get, meta.__setitem__)
    clock.observe(iso_ms(T0 - 95), received=T0)  # served 95 s behind (with 5 s of latency)
    clock.observe(iso_ms(T0 - 90), received=T0)
    clock.observe(iso_ms(T0 - 600), received=T0)  # a late commit: lowers nothing
    clock.observe(iso_ms(T0 + 86400), received=T0)  # a row dated in the future: ignored
    assert clock.offset == -90
    assert clock.now() == iso_ms(T0 - 90)  # never ahead of the stamps' clock
    assert clock.ceiling() == iso_ms(T0)  # the cap on cursors: the latest clock
    local[0] = T0 + 10
    assert clock.now() == iso_ms(T0 - 80)
    again = UpstreamClock(local=lambda: local[0])
    again.keep(meta.get, meta.__setitem__)
    assert again.offset == -90
    # A stamp clock set back is followed within two days, not never.
    local[0] = T0 + 2 * 86400 + 5
    again.observe(iso_ms(local[0] - 200), received=local[0])
    assert again.offset == -200


# -- end to end against the emulator ----------------------------------------------------------


async def _poll_all(poller: Poller, mirror: Mirror, names: list[str]) -> None:
    malls = list(mirror.table("malls").ids()) if mirror.schema.has_table("malls") else []
    for name in names:
        await poller.poll_type(catalogue.TYPES[name], malls, 4)
    await poller.poll_deletions(set(names))


async def test_stamps_ninety_seconds_behind_the_date_clock_lose_nothing(tmp_path: Path) -> None:
    """Stamps 90 s behind `Date`: creations, updates and deletions all reach the mirror by
    polls; a row deleted (confirmed by `filter[id]`) and created again under the same id
    within the lag is not refused by the tombstone."""
    emu = Emulator(resources=300, seed=21, hard=Hard(stamps_behind_date=True, reuse_ids=True))
    async with emu.serve(port=0):
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["articles"], max_backoff=0.05)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            poller = Poller(client, mirror, page_size=100, overlap=5.0)
            ids = emu.ids("articles")
            for rid in ids[:10]:
                emu.update("articles", rid)
            created = [emu.create("articles") for _ in range(3)]
            for rid in ids[10:13]:
                emu.delete("articles", rid)
            await _poll_all(poller, mirror, ["articles"])
            assert compare(db, emu, ["articles"]).differences == 0
            assert all(mirror.table("articles").get(int(c)) is not None for c in created)
            # Deleted with no feed entry, confirmed gone by filter[id], then the id re-used.
            emu.app.data.feed_deletions = False
            gone = ids[20]
            emu.delete("articles", gone)
            evidence = Evidence(client, mirror)
            assert await evidence.confirm_and_delete(scopes_of(ARTICLES, []), [int(gone)]) == 1
            again = emu.create("articles")
            assert str(again) == str(gone)
            await _poll_all(poller, mirror, ["articles"])
            assert mirror.table("articles").get(int(gone)) is not None
            assert compare(db, emu, ["articles"]).differences == 0
        mirror.close()


async def _late_commit_reaches_the_mirror(tmp_path: Path, lag: float) -> int:
    """A change stamped T, visible at T+lag while later stamps are visible at once: the polls
    after it becomes visible that it takes to reach the mirror (the emulator's clock is moved
    instead of waiting)."""
    emu = Emulator(resources=300, seed=22, hard=Hard(late_commits=True))
    async with emu.serve(port=0):
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["articles"], max_backoff=0.05)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            poller = Poller(client, mirror, page_size=100, overlap=5.0)
            (scope,) = scopes_of(ARTICLES, [])
            await poller.poll_scope(scope)
            ids = emu.ids("articles")
            late = int(ids[0])
            emu.app.data.update_late("articles", late, {"title": "committed late"}, lag=lag)
            emu.faults.clock_offset += lag - 10  # later changes, visible at once
            for rid in ids[1:4]:
                emu.update("articles", rid)
            await poller.poll_scope(scope)  # reads past the late row's stamp
            emu.faults.clock_offset += 10  # the late row becomes visible
            row = mirror.table("articles").get(late)
            assert row is not None and row["title"] != "committed late"
            polls = 0
            while row is None or row["title"] != "committed late":
                polls += 1
                assert polls <= 3, f"a change {lag:g} s late not mirrored within 3 polls"
                await poller.poll_scope(scope)
                row = mirror.table("articles").get(late)
            # Measured: the late arrival counted, the lookback grown to cover it.
            assert poller.lookbacks.of("articles").late >= 1
            assert poller.lookbacks.lookback("articles") >= lag - 10
            restarted = Poller(client, mirror, page_size=100, overlap=5.0)  # kept in the mirror
            assert restarted.lookbacks.lookback("articles") >= lag - 10
            # The next one as late is caught by the very next poll.
            emu.app.data.update_late("articles", int(ids[5]), {"title": "late again"}, lag=lag)
            emu.faults.clock_offset += lag - 10
            emu.update("articles", ids[6])
            await poller.poll_scope(scope)
            emu.faults.clock_offset += 10
            await poller.poll_scope(scope)
            again = mirror.table("articles").get(int(ids[5]))
            assert again is not None and again["title"] == "late again"
            assert compare(db, emu, ["articles"]).differences == 0
        mirror.close()
        lines = "\n".join(status_lines(status_data(db)))
        assert "late commits" in lines and "articles" in lines
        return polls


async def test_a_change_committed_twenty_seconds_late_is_mirrored_within_three_polls(
    tmp_path: Path,
) -> None:
    assert await _late_commit_reaches_the_mirror(tmp_path, 20.0) <= 3


async def test_a_change_committed_sixty_seconds_late_is_mirrored_within_three_polls(
    tmp_path: Path,
) -> None:
    assert await _late_commit_reaches_the_mirror(tmp_path, 60.0) <= 3


async def _with_unstable_ties(
    tmp_path: Path, change: Callable[[Emulator, list[Any]], None], check: Callable[..., None]
) -> None:
    emu = Emulator(resources=3500, seed=23, hard=Hard(unstable_ties=True))
    async with emu.serve(port=0):
        db = tmp_path / "m.db"
        settings = settings_for(emu, db, types=["articles"], max_backoff=0.05)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            await Backfill(client, mirror, settings).run()
            poller = Poller(client, mirror, page_size=100, overlap=5.0)
            ids = emu.ids("articles")
            assert len(ids) >= 260
            change(emu, list(ids[:250]))
            await _poll_all(poller, mirror, ["articles"])
            check(mirror, ids[:250])
        mirror.close()
        assert compare(db, emu, ["articles"]).differences == 0


async def test_a_run_of_250_equal_stamps_in_unstable_order_is_mirrored_whole(
    tmp_path: Path,
) -> None:
    """A bulk update of 250 rows under one stamp, served in another tie order for every request:
    one poll mirrors every row (the run is read by id)."""

    def change(emu: Emulator, ids: list[Any]) -> None:
        stamp = emu.app.data.bulk_update("articles", [int(i) for i in ids], {"title": "bulk"})
        assert stamp is not None

    def check(mirror: Mirror, ids: list[Any]) -> None:
        for rid in ids:
            row = mirror.table("articles").get(int(rid))
            assert row is not None and row["title"] == "bulk", rid

    await _with_unstable_ties(tmp_path, change, check)


async def test_a_run_of_250_feed_entries_sharing_created_at_is_applied_whole(
    tmp_path: Path,
) -> None:
    """250 deletions whose feed entries share one `created_at`, served in another tie order for
    every request: one poll of the feed applies them all."""

    def change(emu: Emulator, ids: list[Any]) -> None:
        data = emu.app.data
        entries = [data.delete("articles", int(rid)) for rid in ids]
        stamp = entries[-1].decoded()["created_at"]
        for entry in entries:
            entry.set_attrs({**entry.decoded(), "created_at": stamp, "updated_at": stamp})
            data.revise(entry)
        data.version["deletions"] += 1

    def check(mirror: Mirror, ids: list[Any]) -> None:
        assert [rid for rid in ids if mirror.table("articles").get(int(rid)) is not None] == []

    await _with_unstable_ties(tmp_path, change, check)


# -- tie runs without an emulator: the check, and what an ignored `sort=id` leads to -------------


def _fake_listing(rows: list[tuple[int, str]], *, honours_lte: bool) -> Any:
    """A listing of (id, updated_at) rows with the spec's date filters (`lte` honoured or
    not) and `sort`; ties under a stamp sort in a new order every request."""
    import random

    from sync.channel.pages import Page

    rng = random.Random(7)

    async def fetch(
        anchor: str,
        number: int,
        sort: str = "updated_at",
        *,
        op: str = "gte",
        until: Any = None,
        until_op: str = "lte",
    ) -> Page:
        kept = [r for r in rows if (r[1] >= anchor if op == "gte" else r[1] > anchor)]
        if until is not None and honours_lte:
            kept = [r for r in kept if r[1] <= until]
        rng.shuffle(kept)
        if sort == "updated_at":
            kept.sort(key=lambda r: r[1])  # ties in the shuffled order
        else:
            kept.sort()
        window = kept[(number - 1) * 100 : number * 100]
        docs = [{"id": str(i), "attributes": {"updated_at": s}} for i, s in window]
        return Page(docs, [], {}, number, max(1, -(-len(kept) // 100)), None)

    return fetch


async def test_a_tie_run_is_read_by_id_and_a_run_not_in_id_order_is_refused() -> None:
    """250 rows under one stamp, ties shuffled every request: the walk reads the run by id
    (every row once at least); where `lte` is not honoured the check refuses the run
    (`TieOrder`), and the unsorted walk the poll falls back to reads every row."""
    from sync.channel.paging import Paging
    from sync.jobs.incremental.walks import TieOrder, walk_by_stamp, walk_unsorted

    t, later = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z"
    rows = [(i, t) for i in range(1, 251)] + [(i, later) for i in range(251, 261)]
    seen: set[str] = set()
    result = await walk_by_stamp(
        _fake_listing(rows, honours_lte=True),
        "2025-12-31T00:00:00.000Z",
        "updated_at",
        Paging(100),
        100,
        lambda page: seen.update(r["id"] for r in page.resources),
    )
    assert len(seen) == 260 and result.ties == 1 and result.cursor == later
    fetch = _fake_listing(rows, honours_lte=False)
    seen.clear()
    try:
        await walk_by_stamp(
            fetch,
            t,
            "updated_at",
            Paging(100),
            100,
            lambda p: seen.update(r["id"] for r in p.resources),
        )
    except TieOrder as exc:
        assert exc.at == t
    else:
        raise AssertionError("a run with other stamps was taken as read whole")

    rest = await walk_unsorted(
        lambda n: fetch(t, n, "id"),
        t,
        "updated_at",
        Paging(100),
        100,
        lambda p: seen.update(r["id"] for r in p.resources),
    )
    assert len(seen) == 260 and rest.cursor == later


def test_late_arrivals_and_the_lookback_are_metrics() -> None:
    """`/metrics` carries each type's late arrivals and its current lookback."""
    from sync.core.metrics import Metrics

    metrics = Metrics()
    metrics.lateness("articles", 2, 75.0)
    metrics.lateness("deletions", 0, 5.0)
    body = metrics.render()[0].decode()
    assert 'sync_late_arrivals_total{type="articles"} 2.0' in body
    assert 'sync_poll_lookback_seconds{type="articles"} 75.0' in body
    assert 'sync_poll_lookback_seconds{type="deletions"} 5.0' in body


def test_the_lookback_grows_with_lateness_decays_has_a_ceiling_and_a_deep_re_read() -> None:
    """1.5x the lateness seen at once, halving its excess each hour, never above the ceiling;
    every 3rd poll of a scope reads from cursor - ceiling; kept in `_sync_meta`."""
    from sync.jobs.incremental.lateness import HALF_LIFE, Lookbacks

    now = [T0]
    meta: dict[str, str] = {}

    def make() -> Lookbacks:
        return Lookbacks(
            meta.get, meta.__setitem__, overlap=5.0, ceiling=600.0, clock=lambda: now[0]
        )

    lb = make()
    assert [lb.behind("articles", "") for _ in range(6)] == [5.0, 5.0, 600.0, 5.0, 5.0, 600.0]
    lb.saw("articles", [20.0, 40.0])
    assert lb.lookback("articles") == 60.0
    lb.saw("articles", [3000.0])
    assert lb.lookback("articles") == 600.0  # the ceiling
    now[0] += HALF_LIFE
    assert lb.lookback("articles") == 5.0 + 595.0 / 2
    assert make().lookback("articles") == 5.0 + 595.0 / 2  # after a restart
    assert make().of("articles").late == 3


def test_a_late_commit_never_lands_on_a_row_created_again_under_its_id() -> None:
    """A row with a change pending is dropped (its mall deleted alone) and its id re-used: the
    pending change dies with the row; the new row keeps its own stamp and content."""
    from sync.emulator.dataset import Dataset

    data = Dataset(300, seed=3, hard=Hard(reuse_ids=True))
    rid = data.order["articles"][0]
    data.update_late("articles", rid, {"title": "pending"}, lag=60.0)
    data.drop(data.by_type["articles"][rid])
    again = data.create("articles")
    assert again.id == rid
    before = again.decoded()
    data.settle(float("inf"))
    assert data.by_type["articles"][rid].decoded() == before


def test_the_hours_window_is_dated_by_the_one_upstream_clock() -> None:
    """The malls' hours' "today" is the `Date` clock's, read from the client's `UpstreamClock`
    (`date_ts`) and not recomputed from a signing offset: 2026-03-01 23:00 local, a `Date`
    clock 2 h ahead, is 2026-03-02 upstream, even with no stamp served yet (the stamps' lower
    bound would still be a day back)."""
    local = 1772406000.0  # 2026-03-01T23:00:00Z

    class Client:
        clock = UpstreamClock(local=lambda: local, date_offset=lambda: 7200.0)

    hours = MallHours(Client(), None, clock=lambda: local)  # type: ignore[arg-type]
    assert hours.window(3) == (date(2026, 3, 1), date(2026, 3, 5))


def test_status_shows_late_commits_only_where_polls_met_them() -> None:
    """`ccsync status` names the listings whose polls met late rows (or whose lookback grew),
    one line in all when none did, with nouns that agree with their numbers."""
    quiet = {"late": 0, "largest_s": 0.0, "lookback_s": 5.0}
    assert lateness_lines({}) == []
    assert lateness_lines({"articles": quiet, "deals": quiet}) == [
        "late commits: none measured on 2 listings; lookback 5 s"
    ]
    late = {"late": 1, "largest_s": 50.0, "lookback_s": 75.0}
    lines = lateness_lines({"articles": late, "deals": quiet, "deletions": quiet})
    assert lines[0].endswith("(the others: none, lookback 5 s):")
    assert lines[1:] == ["  articles        1 late arrival, largest 50 s; lookback 75 s"]
