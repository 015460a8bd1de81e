"""Full verify: content changed upstream without a new `updated_at` (the emulator's silent
updates) survives polls and the plain reconcile, and `ccsync reconcile --full` or the daemon's
rolling verify repairs all of it (rows, links, to-one columns, sideloads, mall membership),
counts and logs each repair, and never lets an older copy win."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.core.errors import UpstreamError
from sync.daemon.schedule import verify_share, verify_tick
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.jobs.proving.reconcile import run_reconcile
from sync.jobs.proving.verify import POSITION_KEY, Verifier, run_verify
from sync.model.catalogue import LISTABLE, TYPES
from sync.pipeline.staging import stage_resources
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.mirror_rows import query
from tests.support.pages import write_page
from tests.support.processes import run
from tests.support.settings import settings_for as shared_settings_for
from tests.support.settings import upstream_keys, write_config

#: Every listable type: the comparison then covers the sideloaded images, tags and groups too.
TYPES_MIRRORED = list(LISTABLE)


def settings_for(emu: Emulator, db: Path) -> Settings:
    sections = {"webhooks": {"enabled": False}, "logging": {"level": "warning", "format": "json"}}
    return shared_settings_for(emu, db, sections, types=TYPES_MIRRORED, max_backoff=0.05)


async def backfilled(emu: Emulator, db: Path) -> Settings:
    settings = settings_for(emu, db)
    await run_backfill(settings)
    return settings


def silent_changes(emu: Emulator) -> dict[str, set[str]]:
    """One silent change of each kind the plain reconcile cannot see; the changed ids by type."""
    d = emu.data
    deal = d.order["deals"][0]
    stores = d.order["stores"]
    event = d.order["events"][0]
    other_mall = next(m for m in d.order["malls"] if m != d.by_type["events"][event].links["mall"])
    malls = d.order["malls"]
    # A press release moved from a mall to a later one (the reconcile of the first mall sees it
    # leave, and would delete it for good).
    press = next(
        i for i in d.order["press_releases"] if d.by_type["press_releases"][i].mall != malls[-1]
    )
    emu.silent_update("deals", deal, {"title": "silently retitled"})
    emu.silent_update("events", event, links={"mall": other_mall})
    emu.silent_update("stores", stores[0], {"name": "silently renamed"})
    emu.silent_update("programs", d.order["programs"][0], {"name": "silent program"})
    emu.silent_update("press_releases", press, mall_id=malls[-1])
    return {
        "deals": {str(deal)},
        "events": {str(event)},
        "stores": {str(stores[0])},
        "programs": {str(d.order["programs"][0])},
        "press_releases": {str(press)},
    }


def differing(db: Path, emu: Emulator) -> dict[str, set[str]]:
    c = compare(db, emu)
    out: dict[str, set[str]] = {}
    for kind in (c.missing, c.extra, c.stale, c.stale_links):
        for t, ids in kind.items():
            out.setdefault(t, set()).update(i.split(".")[0] for i in ids)
    return {t: ids for t, ids in out.items() if ids}


def mall_of(db: Path, table: str, rid: str) -> int | None:
    rows = query(db, f"select mall_id from [{table}] where id = ?", int(rid))
    return None if not rows else int(rows[0][0])


async def test_plain_reconcile_leaves_silent_changes_and_the_full_verify_repairs_them(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=600, seed=31) as emu:
        db = tmp_path / "m.db"
        settings = await backfilled(emu, db)
        assert differing(db, emu) == {}
        stamps = {t: emu.snapshot(t) for t in ("deals", "events", "stores")}
        changed = silent_changes(emu)
        for t, snap in stamps.items():  # the stamps did not move
            now = emu.snapshot(t)
            assert {i: now[i]["updated_at"] for i in snap} == {
                i: r["updated_at"] for i, r in snap.items()
            }
        press = next(iter(changed["press_releases"]))

        _, refusals = await run_reconcile(settings)
        assert refusals == []
        left = differing(db, emu)
        # Everything is still wrong after a plain reconcile, but the press release moved
        # between malls under the same stamp: the listings are the proof of membership, so it
        # is in its new mall now (it was deleted for good once: a live row lost).
        for t, ids in changed.items():
            if t not in ("press_releases", "events"):
                assert ids <= left.get(t, set()), (t, left)
        # The event's mall (a to-one link) changed under its stamp: the reconcile's listing
        # carries the linkage and repairs it too.
        assert "events" not in left, left
        assert mall_of(db, "press_releases", press) == int(
            emu.mall_of("press_releases", press) or 0
        )

        # Changes the reconcile's listing would also have refreshed (links of unchanged
        # owners, sideloads), made after it: an image's text, a deal's stores, an article's images.
        d = emu.data
        article = d.order["articles"][0]
        linked = d.by_type["deals"][d.order["deals"][1]].links.get("stores")
        other_store = next(s for s in d.order["stores"] if [s] != linked)
        emu.silent_update("deals", d.order["deals"][1], links={"stores": [other_store]})
        image = d.by_type["deals"][d.order["deals"][2]].links["images"] or d.order["images"][:1]
        emu.silent_update("images", image[0], {"alt_text": "silent alt"})
        new_images = [i for i in d.order["images"][-3:]]
        emu.silent_update("articles", article, links={"images": new_images})

        with capture_logs() as logs:
            report = await run_verify(settings)
        _, refusals = await run_reconcile(settings)
        assert refusals == []
        assert differing(db, emu) == {}
        assert mall_of(db, "press_releases", press) == int(
            emu.mall_of("press_releases", press) or 0
        )
        # (The press release's move was the reconcile's to repair, above.)
        for t in ("deals", "stores", "programs", "images", "articles"):
            assert report.repairs.get(t, 0) >= 1, (t, report.repairs)
        assert report.repairs["deals"] == 2
        repaired = [e for e in logs if e["event"] == "verify.repaired"]
        assert len(repaired) == report.repaired
        title = next(e for e in repaired if e["type"] == "deals" and "title" in e["differed"])
        assert "silently retitled" not in str(title)  # names what differed, never the value
        links = next(e for e in repaired if e["type"] == "deals" and "links" in e["differed"])
        assert links["differed"] == "links.stores"

        # A second full verify finds nothing left to repair.
        assert (await run_verify(settings)).repaired == 0


def test_the_repair_write_never_lets_an_older_copy_win(tmp_path: Path) -> None:
    mirror = Mirror.open(tmp_path / "m.db")
    deals, tags = TYPES["deals"], TYPES["tags"]

    def deal(stamp: str, title: str) -> dict[str, Any]:
        return {"id": "1", "type": "deals", "attributes": {"title": title, "updated_at": stamp}}

    try:
        write_page(mirror, deals, [deal("2026-01-02T00:00:00.000Z", "new")])
        assert (
            mirror.repair(stage_resources(deals, [deal("2026-01-01T00:00:00.000Z", "old")])) == []
        )
        assert mirror.table("deals").get(1)["title"] == "new"  # type: ignore[index]
        assert (
            mirror.repair(stage_resources(deals, [deal("2026-01-02T00:00:00.000Z", "new")])) == []
        )
        [fixed] = mirror.repair(
            stage_resources(deals, [deal("2026-01-02T00:00:00.000Z", "same stamp")])
        )
        assert (fixed.type, fixed.id, fixed.what) == ("deals", 1, ("title",))
        assert mirror.table("deals").get(1)["title"] == "same stamp"  # type: ignore[index]
        # A newer copy is written, but it is lag, not a silent change: not a repair.
        assert (
            mirror.repair(stage_resources(deals, [deal("2026-01-03T00:00:00.000Z", "newer")])) == []
        )
        assert mirror.table("deals").get(1)["title"] == "newer"  # type: ignore[index]
        # Types without a stamp (tags) take the served copy when it differs.
        write_page(mirror, tags, [{"id": "5", "type": "tags", "attributes": {"name": "a"}}])
        [tag] = mirror.repair(
            stage_resources(tags, [{"id": "5", "type": "tags", "attributes": {"name": "b"}}]),
        )
        assert tag.what == ("name",) and mirror.table("tags").get(5)["name"] == "b"  # type: ignore[index]
    finally:
        mirror.close()


async def test_the_rolling_verify_resumes_from_its_position_and_covers_the_mirror(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=600, seed=32) as emu:
        db = tmp_path / "m.db"
        settings = await backfilled(emu, db)
        changed = silent_changes(emu)
        types = settings.upstream.mirrored_types()
        steps = requests = 0
        repaired: dict[str, int] = {}
        while True:
            # A new process each step: the position lives in the mirror.
            mirror = Mirror.open(db)
            try:
                async with ChannelClient(settings.upstream) as client:
                    verifier = Verifier(client, mirror)
                    malls = list(mirror.table("malls").ids())
                    cost = verifier.cost(types, malls)
                    report = await verifier.step(types, malls, budget=3)
                    position = mirror.meta.get(POSITION_KEY)
            finally:
                mirror.close()
            steps += 1
            requests += report.requests
            for t, n in report.repairs.items():
                repaired[t] = repaired.get(t, 0) + n
            if report.cycle_done:
                assert position is None
                break
            assert position is not None
            if steps == 1:
                assert (
                    status_data(settings.mirror.path)["verify_position"] == position
                )  # `ccsync status`
            assert report.requests <= 3 + 2  # a unit (3 deal visibilities) may overrun a little
            assert steps < 1000
        assert status_data(settings.mirror.path)["verify_cycle_finished_at"]
        assert steps > 5  # spread over many steps, not one burst
        assert abs(requests - cost) <= cost // 4 + 3
        assert set(changed) <= set(repaired)
        assert differing(db, emu) == {}


def test_the_rolling_verify_spreads_a_cycle_over_its_interval() -> None:
    week = 604800.0
    assert verify_tick(week) == 60.0
    assert verify_tick(50.0) == 1.0
    # A 100k-row mirror (~1,300 requests a cycle): one request every ~8 ticks, flat.
    per_tick = verify_share(1300, week)
    assert 0.1 < per_tick < 0.2
    assert per_tick * week / verify_tick(week) == pytest.approx(1300)


async def test_the_daemon_counts_repairs_and_keeps_the_verify_job(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=400, seed=33) as emu:
        db = tmp_path / "m.db"
        settings = await backfilled(emu, db)
        d = emu.data
        emu.silent_update("deals", d.order["deals"][0], {"title": "silently retitled"})
        emu.silent_update("articles", d.order["articles"][0], {"title": "silent too"})
        daemon = Daemon(settings)
        task = asyncio.create_task(daemon.run())
        try:
            while not daemon.is_ready:
                assert not task.done()
                await asyncio.sleep(0.05)
            assert "verify" in daemon.running.mirror.jobs.all()  # scheduled with the others
            daemon.bodies.verify_credit = 1e9  # the whole cycle in one step
            await daemon.running.runs.wrap("verify", daemon.bodies.verify_step, 60.0)()
            body = daemon.metrics.render()[0].decode()
            assert 'sync_verify_repairs_total{type="deals"} 1.0' in body
            assert 'sync_verify_repairs_total{type="articles"} 1.0' in body
            job = daemon.running.mirror.jobs.all()["verify"]
            assert job["outcome"] == "ok" and job["next_run_at"]
            assert daemon.health()["status"] == "ok"

            async def failing(*args: Any, **kwargs: Any) -> Any:
                raise UpstreamError("the upstream failed mid-verify", status=503)

            daemon.bodies.verifier.step = failing  # type: ignore[method-assign]
            await daemon.running.runs.wrap("verify", daemon.bodies.verify_step, 60.0)()
            assert daemon.running.mirror.jobs.all()["verify"]["outcome"] == "error"
            health = daemon.health()
            assert health["status"] == "degraded"
            assert any(p.startswith("verify error") for p in health["problems"])
        finally:
            daemon.request_stop()
            await asyncio.wait_for(task, timeout=15)
        assert differing(db, emu) == {}


async def test_sync_reconcile_full_prints_the_repairs_per_type(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=300, seed=34) as emu:
        db = tmp_path / "m.db"
        await backfilled(emu, db)
        emu.silent_update("deals", emu.data.order["deals"][0], {"title": "silently retitled"})
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream=upstream_keys(emu, "VERIFY_PW", types=TYPES_MIRRORED, max_backoff=0.05),
            mirror={"path": db},
            logging={"level": "warning", "format": "json"},
        )
        env = {"VERIFY_PW": emu.password}
        rc, out, err = await run("reconcile", "--full", "--config", str(cfg), env=env)
        assert rc == 0, err
        lines = out.splitlines()
        assert any(line.split()[:3] == ["deals", "repaired", "1"] for line in lines), lines
        assert "verify: 1 rows repaired" in lines
        assert differing(db, emu) == {}


def test_a_silent_update_keeps_the_stamp_and_sends_no_notice() -> None:
    emu = Emulator(resources=200, seed=35)
    seen: list[Any] = []
    emu.data.listeners.append(lambda *a: seen.append(a))
    rid = emu.data.order["deals"][0]
    before = emu.resource("deals", rid)
    emu.silent_update("deals", rid, {"title": "silent"})
    after = emu.resource("deals", rid)
    assert after["attributes"]["title"] == "silent"
    assert after["attributes"]["updated_at"] == before["attributes"]["updated_at"]
    assert seen == []
    emu.data.silent_rate = 1.0
    done = emu.mutate_randomly(50, 1)
    assert any(kind == "silent" for kind, _, _ in done)
    assert seen == [] or all(a[0] != "update" or a[1] != "x" for a in seen)
