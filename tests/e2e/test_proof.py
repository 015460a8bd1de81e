"""The rolling proof (issue 39): whatever the notices, polls and the feed miss is repaired within
the staleness bound with no command run; deletions are confirmed with canaries, so a storm of
real ones needs no `--force` and a faulty upstream deletes nothing and raises the alarm."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.core.metrics import Metrics
from sync.daemon.health import Gauges
from sync.daemon.state import SyncState
from sync.emulator import Emulator
from sync.jobs.proving.proof import Proof, run_proof_cycle
from sync.model import catalogue
from sync.model.stamps import shift
from sync.readers.status import status_data, status_lines
from sync.store import Mirror
from sync.store import proof as proof_book
from sync.store.queue import ChangeQueue
from tests.support.backfilled import backfill
from tests.support.compare import compare
from tests.support.daemon import running
from tests.support.settings import daemon_settings
from tests.support.waiting import eventually

OLD = "2020-01-01T00:00:00.000Z"


def restamp(emu: Emulator, type_name: str, rid: int, stamp: str, **attrs: Any) -> None:
    """Change a row upstream under `stamp` (behind every cursor), with no notice or feed entry."""
    rec = emu.data.by_type[type_name][rid]
    merged = {**rec.decoded(), **attrs, "updated_at": stamp}
    rec.set_attrs(merged)
    emu.data.untouched(rec)


def silent_changes(emu: Emulator, db: Path) -> dict[str, list[int]]:
    """Rows deleted with no feed entry, changed under a stamp behind every cursor, and created
    with an old stamp: none of them reaches the mirror by a notice, a poll or the feed."""
    emu.data.feed_deletions = False
    ids = [int(i) for i in emu.ids("articles")]
    deleted, changed = ids[:5], ids[5:10]
    for rid in deleted:
        emu.delete("articles", rid)
    mirror = Mirror.open(db, readonly=True)
    try:
        stamps = mirror.table("articles").stamps(changed)
    finally:
        mirror.close()
    for rid in changed:
        # A millisecond after the mirror's copy: newer, yet far behind the poll cursor.
        restamp(emu, "articles", rid, shift(str(stamps[rid]), 0.001), title=f"silent {rid}")
    created = []
    for _ in range(3):
        rid = int(emu.create("articles"))
        restamp(emu, "articles", rid, OLD)
        created.append(rid)
    return {"deleted": deleted, "changed": changed, "created": created}


async def test_daemon_repairs_what_notices_polls_and_feed_miss_within_the_bound(
    make_emulator: Any, tmp_path: Path
) -> None:
    """No webhooks, no feed entries, polls an hour apart: the rolling proof (bound 4 s) alone
    repairs silent deletions, changes under an old stamp and creations with an old stamp; status
    and /metrics show the proof's age and the repairs by kind."""
    async with make_emulator(resources=3000, seed=39) as emu:
        db = tmp_path / "m.db"
        settings = daemon_settings(emu, db, webhooks=False, staleness_bound=4.0)
        async with running(settings) as daemon:
            rows = silent_changes(emu, db)
            await eventually(
                lambda: (
                    compare(db, emu, ["articles"]).differences == 0
                    and all(
                        daemon.running.mirror.table("articles").get(i) is None
                        for i in rows["deleted"]
                    )
                ),
                timeout=60,
            )
            for rid in rows["changed"]:
                assert daemon.running.mirror.table("articles").get(rid)["title"] == f"silent {rid}"  # type: ignore[index]
            await eventually(
                lambda: (
                    proof_book.proven(daemon.running.mirror.conn)
                    .get("articles", {})
                    .get("proven_at")
                    is not None
                ),
                timeout=30,
            )
            metrics = daemon.metrics.render()[0].decode()
        data = status_data(db)
    kinds = data["proof"]["repairs"]["articles"]
    assert kinds["missed_deletion"] == 5, kinds
    assert kinds["missed_change"] == 5, kinds
    assert kinds["missed_creation"] == 3, kinds
    assert data["proof"]["types"]["articles"]["age_s"] is not None
    text = "\n".join(status_lines(data))
    assert "proof: staleness bound 4 s" in text
    assert "articles        proven complete" in text
    assert "missed_deletion 5" in text and "missed_creation 3" in text
    assert "change lag articles: proof p50" in text
    assert 'sync_proven_age_seconds{type="articles"}' in metrics
    assert 'sync_repairs_total{kind="missed_deletion",type="articles"} 5.0' in metrics
    assert 'sync_change_lag_seconds_count{path="proof",type="articles"} 8.0' in metrics
    assert not [p for p in data["problems"] if p.startswith("proof")]


async def test_a_deletion_storm_of_real_deletions_needs_no_force(
    make_emulator: Any, tmp_path: Path
) -> None:
    """40 % of a small table deleted with no feed entry, a top-level one and a mall-scoped one
    (whose rows no mall lists any more are asked in every mall): every deletion is confirmed by
    `filter[id]` with canaries, so one cycle (`ccsync reconcile`, no --force) leaves the
    mirror exact; the mass-delete guard (20 %) holds none of it."""
    async with make_emulator(resources=600, seed=40) as emu:
        db = tmp_path / "m.db"
        types = ["malls", "articles", "stores"]
        settings = await backfill(emu, db, types=types, max_backoff=0.05)
        emu.data.feed_deletions = False
        storms = {}
        for name in ("articles", "stores"):
            ids = emu.ids(name)
            storms[name] = ids[: int(len(ids) * 0.4)]
            for rid in storms[name]:
                emu.delete(name, rid)
        result, refusals = await run_proof_cycle(settings)
        assert refusals == []
        assert result["articles"] == (0, len(storms["articles"]))
        assert result["stores"][1] == len(storms["stores"])
        assert compare(db, emu, types).differences == 0


class Faulty:
    """An upstream that lists half its rows and whose `filter[id]` answers empty for all."""

    def __init__(self, client: ChannelClient) -> None:
        list_page, fetch_ids = client.list_page, client.fetch_ids

        async def half(*args: Any, **kwargs: Any) -> Page:
            page = await list_page(*args, **kwargs)
            return dataclasses.replace(page, resources=page.resources[::2])

        async def empty(*args: Any, **kwargs: Any) -> Page:
            page = await fetch_ids(*args, **kwargs)
            return dataclasses.replace(page, resources=[], included=[])

        client.list_page = half  # type: ignore[method-assign]
        client.fetch_ids = empty  # type: ignore[method-assign]


async def test_a_faulty_upstream_deletes_nothing_and_raises_the_alarm(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A listing with half its rows and `filter[id]` answering empty for everything: the
    canaries (rows the listing shows alive) come back "gone" too, so no answer is evidence:
    nothing is deleted, the type is not proven, and status says degraded."""
    async with make_emulator(resources=600, seed=41) as emu:
        db = tmp_path / "m.db"
        types = ["malls", "articles", "stores"]
        settings = await backfill(emu, db, types=types, max_backoff=0.05)
        mirror = Mirror.open(db)
        try:
            counts = {name: mirror.table(name).count() for name in types}
            before = counts["articles"]
            async with ChannelClient(settings.upstream) as client:
                Faulty(client)
                proof = Proof(client, mirror, catalogue.resolve(types), max_delete_share=0.2)
                report = await proof.run_all()
            assert {name: mirror.table(name).count() for name in types} == counts
            assert {"malls", "articles", "stores"} <= set(report.unresolved)
            entry = proof_book.proven(mirror.conn)["articles"]
            assert entry["proven_at"] is None and entry["unresolved"] == before // 2
            # What the alert `SyncProofUnresolved` reads (systemd/sync-alerts.yml).
            async with ChannelClient(settings.upstream) as client:
                state = SyncState(catalogue.resolve(types))
                live = Gauges(state, mirror, client, ChangeQueue(mirror.conn))
                metrics = Metrics(live).render()[0].decode()
            assert f'sync_proof_unresolved_rows{{type="articles"}} {before // 2}.0' in metrics
        finally:
            mirror.close()
        data = status_data(db)
    assert any(p.startswith("proof of articles:") and "guard" in p for p in data["problems"])
    # No daemon runs now: the problem is what the last run left, not a degraded daemon.
    lines = status_lines(data)
    assert any(line.startswith("left by the last run: proof of articles") for line in lines)
    assert not any(line.startswith("degraded:") for line in lines)


async def test_a_restart_resumes_the_cycle_where_it_stopped(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Each step keeps its place (`proof_position`): a new process continues the listing at
    the page it stood at instead of starting the cycle over."""
    async with make_emulator(resources=3000, seed=42) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"], max_backoff=0.05)
        types = [catalogue.TYPES["articles"]]
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream) as client:
                first = await Proof(client, mirror, types, max_delete_share=0.2).step(2)
            assert first.requests == 2 and not first.cycle_done
            assert proof_book.position(mirror.conn) == {
                **(proof_book.position(mirror.conn) or {}),
                "unit": "articles",
                "page": 3,
            }
            async with ChannelClient(settings.upstream) as client:
                proof = Proof(client, mirror, types, max_delete_share=0.2)
                pages: list[int] = []
                list_page = client.list_page

                async def counted(rtype: Any, number: int, **kwargs: Any) -> Page:
                    pages.append(number)
                    return await list_page(rtype, number, **kwargs)

                client.list_page = counted  # type: ignore[method-assign]
                done = await proof.step(10_000)
            assert pages[0] == 3 and done.cycle_done
            assert proof_book.proven(mirror.conn)["articles"]["proven_at"] is not None
        finally:
            mirror.close()
    await asyncio.sleep(0)


async def test_the_proof_takes_only_slots_no_other_request_waits_for() -> None:
    """`Priority.PROOF` is the budget's lowest: polls and the feed asked while proof requests
    wait are all granted first."""
    from sync.channel.budget import Priority, RequestBudget, priority
    from tests.support.clock import FakeClock

    clock = FakeClock()
    order: list[Priority] = []
    budget = RequestBudget(
        5.0, clock=clock, sleep=clock.sleep, on_grant=lambda _, p: order.append(p)
    )

    async def request(level: Priority) -> None:
        with priority(level):
            await budget.acquire()

    tasks = [asyncio.create_task(request(Priority.PROOF)) for _ in range(10)]
    tasks += [asyncio.create_task(request(Priority.HOURS)) for _ in range(5)]
    tasks += [asyncio.create_task(request(Priority.POLL)) for _ in range(5)]
    await asyncio.gather(*tasks)
    # The first grant was immediate (a free slot); every later one went by priority.
    assert order[1:11] == [Priority.POLL] * 5 + [Priority.HOURS] * 5
    assert order.count(Priority.PROOF) == 10
    await budget.close()


async def test_a_poll_measures_the_lag_of_the_changes_it_commits(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`sync_change_lag_seconds{path="poll"}`: one lag per row whose stamp the poll moved
    (rows the poll's overlap re-reads unchanged count for nothing)."""
    from sync.jobs.incremental.poll import Poller
    from sync.model.scopes import scopes_of

    async with make_emulator(resources=600, seed=43) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"], max_backoff=0.05)
        for rid in emu.ids("articles")[:3]:
            emu.update("articles", rid)
        seen: list[tuple[str, str, float]] = []
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream) as client:
                poller = Poller(
                    client,
                    mirror,
                    page_size=100,
                    overlap=5.0,
                    on_lag=lambda t, path, lags: seen.extend((t, path, s) for s in lags),
                )
                (scope,) = scopes_of(catalogue.TYPES["articles"], [])
                await poller.poll_scope(scope)
                await poller.poll_scope(scope)  # nothing changed since: no lag at all
        finally:
            mirror.close()
    assert len(seen) == 3 and all(t == "articles" and p == "poll" for t, p, _ in seen)
    assert all(0 <= s < 60 for _, _, s in seen)


def test_status_says_the_bound_the_budget_can_keep() -> None:
    """A cycle the request budget cannot fit in the bound: status names the bound it can
    keep and by how much the configured one falls short."""
    from sync.jobs.proving.pacing import keepable_bound
    from sync.readers.status import proof_lines

    lines = proof_lines(
        {
            "staleness_bound_s": 3600.0,
            "verify_interval_s": 604800.0,
            "cycle_requests": 10_000,
            "budget": keepable_bound(10_000, 1.0, 3600.0),
            "types": {"deals": {"proven_at": None, "age_s": None, "unresolved": 0}},
        }
    )
    assert lines[0] == (
        "proof: staleness bound 3600 s; content under an unchanged stamp: the verify, "
        "every 604800 s"
    )
    assert "it can keep 20000 s, 16400 s short" in lines[1]
    assert lines[2].strip() == "deals           proven complete never (bound 3600 s)"


async def test_mall_scoped_types_are_proven_through_one_walk_of_the_malls(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Where `GET /malls?include=` serves the members (the polls' fast path), the proof lists
    every mall's stores in one walk of `/malls` pages instead of a listing per mall, and still
    repairs a store changed under an old stamp and one created with an old stamp."""
    async with make_emulator(resources=600, seed=44) as emu:
        emu.app.mall_includes = True
        db = tmp_path / "m.db"
        settings = daemon_settings(emu, db, webhooks=False, staleness_bound=4.0)
        async with running(settings) as daemon:
            assert [t.name for t in daemon.bodies.members.fast()] == ["stores"]
            kinds = [u.kind for u in daemon.bodies.proof.units(daemon.bodies.proof.malls())]
            assert "members" in kinds
            # After the first poll (the members poll compares stamps with the mirror's, not a
            # cursor: it would see these), and the next an hour away.
            await eventually(
                lambda: daemon.running.mirror.jobs.all().get("poll", {}).get("outcome") == "ok"
            )
            # And after a first cycle (whose start probes the upstream's routes, once a day).
            await eventually(
                lambda: daemon.running.mirror.meta.get("proof_cycle_finished_at") is not None
            )
            emu.requests.reset()
            stores = [int(i) for i in emu.ids("stores")]
            stamp = daemon.running.mirror.table("stores").stamps([stores[0]])[stores[0]]
            restamp(emu, "stores", stores[0], shift(str(stamp), 0.001), name="silent store")
            mall = int(emu.mall_of("stores", stores[1]) or 0)
            rid = int(emu.create("stores", mall_id=mall))
            restamp(emu, "stores", rid, OLD)
            await eventually(
                lambda: compare(db, emu, ["stores"]).differences == 0,
                timeout=60,
            )
            kinds_repaired = proof_book.repairs(daemon.running.mirror.conn)["stores"]
            routes = dict(emu.requests.routes)
            malls = len(daemon.bodies.proof.malls())
        # Proven per scope too: each mall's stores, and the oldest shown.
        stores = status_data(db)["proof"]["types"]["stores"]
        assert stores["scopes"] == malls and stores["oldest_scope_age_s"] is not None
        # No per-mall listing of stores: the walk of `/malls` pages listed them (the fetches by
        # `filter[id]` of what it found go to the mall routes).
        assert routes.get("/malls", 0) > 0
        per_mall = [r for r in routes if r.endswith("/stores")]
        assert all(routes[r] <= 2 for r in per_mall), routes
        assert kinds_repaired.get("missed_change") == 1
        assert kinds_repaired.get("missed_creation") == 1


async def test_a_canary_that_left_meanwhile_is_replaced_by_the_next(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The most recently changed row (the first canary) is no longer served by `filter[id]`
    (made Private, deleted since the listing): the confirmation is asked again with the next
    canaries, and the real deletions go through."""
    async with make_emulator(resources=600, seed=45) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"], max_backoff=0.05)
        emu.data.feed_deletions = False
        ids = [int(i) for i in emu.ids("articles")]
        for rid in ids[:3]:
            emu.delete("articles", rid)
        snap = emu.snapshot("articles")
        newest = int(max(snap, key=lambda i: (snap[i]["updated_at"], int(i))))
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream) as client:
                fetch_ids = client.fetch_ids

                async def without_newest(*args: Any, **kwargs: Any) -> Page:
                    page = await fetch_ids(*args, **kwargs)
                    kept = [r for r in page.resources if int(r["id"]) != newest]
                    return dataclasses.replace(page, resources=kept)

                client.fetch_ids = without_newest  # type: ignore[method-assign]
                proof = Proof(client, mirror, [catalogue.TYPES["articles"]], max_delete_share=0.2)
                report = await proof.run_all()
            assert report.unresolved == {}
            assert report.repairs["articles"] == {"missed_deletion": 3}
            assert all(mirror.table("articles").get(rid) is None for rid in ids[:3])
            assert mirror.table("articles").get(newest) is not None
        finally:
            mirror.close()


async def test_a_notice_measures_the_lag_of_the_change_it_commits(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`sync_change_lag_seconds{path="notice"}`: a change announced by a webhook is observed
    once its fetch commits, and summarised for `ccsync status`."""
    async with make_emulator(resources=600, seed=46) as emu:
        db = tmp_path / "m.db"
        settings = daemon_settings(emu, db, webhooks=True)
        async with running(settings) as daemon:
            rid = emu.ids("articles")[0]
            emu.update("articles", rid, {"title": "announced"})
            await eventually(
                lambda: (
                    proof_book.lags(daemon.running.mirror.conn).get("articles", {}).get("notice")
                ),
                timeout=30,
            )
            metrics = daemon.metrics.render()[0].decode()
        data = status_data(db)
    assert 'sync_change_lag_seconds_count{path="notice",type="articles"} 1.0' in metrics
    assert data["proof"]["change_lag"]["articles"]["notice"]["count"] == 1
    assert "change lag articles: notice p50" in "\n".join(status_lines(data))


async def test_a_row_the_mirror_refuses_is_unresolved_in_status_and_metrics_not_repaired(
    make_emulator: Any, tmp_path: Path
) -> None:
    """#46: a live article the upstream lists, which a tombstone dated after every copy of it
    keeps out of the mirror. The proof used to log it repaired and call the type proven while
    the mirror held nothing; now the type is unresolved naming why, in the proof's report,
    `ccsync status` and `sync_proof_unresolved_rows`, and no repair is counted."""
    async with make_emulator(resources=300, seed=43) as emu:
        db = tmp_path / "m.db"
        types = ["articles"]
        settings = await backfill(emu, db, types=types)
        rid = int(emu.ids("articles")[2])
        mirror = Mirror.open(db)
        try:
            # A feed entry dated after every copy: the row deleted, its tombstone refuses them.
            mirror.table("articles").apply_feed({rid: "2999-01-01T00:00:00.000Z"})
            async with ChannelClient(settings.upstream) as client:
                proof = Proof(client, mirror, catalogue.resolve(types), max_delete_share=0.2)
                with capture_logs() as events:
                    report = await proof.run_all()
            assert mirror.table("articles").get(rid) is None
            assert "articles" in report.unresolved and "tombstone" in report.unresolved["articles"]
            assert not [e for e in events if e["event"] == "proof.repaired"]
            entry = proof_book.proven(mirror.conn)["articles"]
            assert entry["proven_at"] is None and entry["unresolved"] == 1
            async with ChannelClient(settings.upstream) as client:
                live = Gauges(
                    SyncState(catalogue.resolve(types)), mirror, client, ChangeQueue(mirror.conn)
                )
                metrics = Metrics(live).render()[0].decode()
            assert 'sync_proof_unresolved_rows{type="articles"} 1.0' in metrics
            assert 'sync_repairs_total{kind="missed_creation"' not in metrics
        finally:
            mirror.close()
        text = "\n".join(status_lines(status_data(db)))
    assert "proof of articles" in text and "tombstone" in text
