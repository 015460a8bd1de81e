"""Convergence under chaos: a seeded storm of changes and faults, then the mirror must equal the upstream.

The emulator runs in this process over real HTTP with every fault on: 5xx, 429 with
`Retry-After`, stalled answers past the client's timeout, dropped connections; webhook deliveries
lost, duplicated, reordered and batched; a forced logout; an unsubscription of every webhook
mid-run (and the upstream's own auto-unsubscribe while the daemon is down); a clock offset inside
the signature window, then far beyond it. The daemon runs as a real subprocess from an empty
mirror (so the storm starts during its backfill) and is killed with SIGKILL at random moments
(mid-backfill, mid-page, mid-queue, mid-reconcile: the reconcile job runs every few seconds) and
restarted. Thousands of creates, updates and deletes land meanwhile, many in the same second.

After the storm: faults off, the daemon given a moment and stopped, one `ccsync reconcile`, and every
mirrored type compared with the emulator row by row: nothing missing, nothing extra, nothing stale.
A variant also changes content silently (no new `updated_at`, no notice) and ends with
`ccsync reconcile --full`, which must leave no difference of any kind.

Size (CI runs the default bounded size; a long run sets these):
    SYNC_CHAOS_MUTATIONS (600), SYNC_CHAOS_KILLS (3), SYNC_CHAOS_RESOURCES (1500),
    SYNC_CHAOS_RATE (mutations per second, 60), SYNC_CHAOS_SEED (random; printed, replays a run).
    SYNC_CHAOS_MUTATIONS=20000 SYNC_CHAOS_KILLS=10 .venv/bin/pytest -m slow tests/e2e/test_chaos.py
A run depends on timing as well as on the seed (the daemon is a real process), so a replay
repeats the same mutations, faults and kill schedule, not the same interleaving.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sync.emulator import Emulator
from tests.support.chaos import FAST_SCHEDULE, SECRET, chaos_config, env_int, storm_faults
from tests.support.compare import compare
from tests.support.ports import free_port
from tests.support.processes import DaemonProcess, run_logged


@dataclass
class Plan:
    """Everything a seed decides: sizes, the kill schedule, when each fault switches."""

    seed: int
    mutations: int
    kills: int
    resources: int
    rate: float
    kill_times: list[float] = field(default_factory=list)

    @classmethod
    def from_env(cls) -> Plan:
        seed = env_int("SYNC_CHAOS_SEED", random.randrange(1 << 30))
        plan = cls(
            seed=seed,
            mutations=env_int("SYNC_CHAOS_MUTATIONS", 600),
            kills=env_int("SYNC_CHAOS_KILLS", 3),
            resources=env_int("SYNC_CHAOS_RESOURCES", 1500),
            rate=float(os.environ.get("SYNC_CHAOS_RATE", "60")),
        )
        rng = random.Random(seed)
        duration = plan.mutations / plan.rate
        if plan.kills:
            # The first kill lands early, inside the first backfill; the rest anywhere.
            first = rng.uniform(1.5, 3.0)
            rest = sorted(
                rng.uniform(first + 1.0, max(duration, first + 2.0)) for _ in range(plan.kills - 1)
            )
            plan.kill_times = [first, *rest]
        return plan


def _mirror_has_secret(db: Path, secrets: list[str]) -> list[str]:
    """Tables/columns of the mirror holding any of `secrets` (must be none)."""
    found: list[str] = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for t in tables:
            for row in conn.execute(f"select * from [{t}]"):
                text = "\x1f".join(str(v) for v in row)
                found += [f"{t}: {s[:3]}..." for s in secrets if s in text]
    finally:
        conn.close()
    return found


@pytest.mark.slow
async def test_mirror_converges_after_a_storm(
    make_emulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await _storm(make_emulator, tmp_path, capsys, silent=False)


@pytest.mark.slow
async def test_a_full_reconcile_repairs_silent_changes_after_a_storm(
    make_emulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same storm, and a share of the updates change content without a new `updated_at`
    and without a notice (`Dataset.silent_rate`); the daemon's rolling verify runs through it
    (a short `verify_interval`). The plain reconcile cannot see those changes; `ccsync reconcile
    --full` must leave 0 differences of any kind (rows, links, mall lists, sideloads)."""
    await _storm(make_emulator, tmp_path, capsys, silent=True)


async def _storm(
    make_emulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], *, silent: bool
) -> None:
    plan = Plan.from_env()
    rng = random.Random(plan.seed)
    replay = f"replay with SYNC_CHAOS_SEED={plan.seed}"
    ops = {"create": 0, "update": 0, "delete": 0, "silent": 0}
    async with make_emulator(resources=plan.resources, seed=plan.seed % 100_000) as emu:
        assert isinstance(emu, Emulator)
        db = tmp_path / "mirror.db"
        schedule = {**FAST_SCHEDULE, **({"verify_interval": 20.0} if silent else {})}
        cfg = chaos_config(tmp_path, emu, db, free_port(), schedule)
        env = {"CHAOS_PW": emu.password, "CHAOS_SECRET": SECRET}
        daemon = DaemonProcess(cfg, env, tmp_path / "daemon.log")
        storm_faults(emu)
        emu.data.silent_rate = 0.15 if silent else 0.0
        # The plain storm starts with the malls' members served in `GET /malls?include=` (the
        # fast path) and stops serving them after the storm: the daemon must fall back to
        # per-mall listings while it runs. The silent storm never has them.
        emu.app.mall_includes = not silent
        logouts = unsubscribed = 0
        await daemon.start()
        t0 = time.monotonic()
        kill_times = list(plan.kill_times)
        served_during_storm = 0
        try:
            for step in range(plan.mutations):
                for kind, rtype, rid in emu.mutate_randomly(1, rng.randrange(1 << 30)):
                    ops[kind] += 1
                    if rng.random() < 0.05:  # a sideload changes or goes; owners untouched
                        side = rng.choice(["images", "tags", "groups"])
                        pool = emu.ids(side)
                        if pool and rng.random() < 0.3:
                            emu.delete(side, rng.choice(pool))
                        elif pool:
                            emu.update(side, rng.choice(pool))
                    if kind != "delete" and rng.random() < 0.1:
                        for _ in range(rng.randint(1, 3)):  # the same row again, same second
                            emu.update(rtype, rid)
                            ops["update"] += 1
                if step == plan.mutations // 4:
                    emu.force_logout()
                    logouts += 1
                if step == plan.mutations // 3:
                    unsubscribed += emu.unsubscribe_all()
                if step == int(plan.mutations * 0.45):
                    emu.faults.clock_offset = (
                        120.0  # far beyond the window: the Date header cures it
                    )
                if step == int(plan.mutations * 0.6):
                    emu.faults.clock_offset = 10.0
                    emu.force_logout()
                    logouts += 1
                if kill_times and time.monotonic() - t0 >= kill_times[0]:
                    kill_times.pop(0)
                    await daemon.kill()
                    await asyncio.sleep(rng.uniform(0.0, 1.0))  # deliveries fail meanwhile
                    await daemon.start()
                delay = (step + 1) / plan.rate - (time.monotonic() - t0)
                await asyncio.sleep(max(delay, 0.0))
            while kill_times:  # a short storm still makes every kill it planned
                kill_times.pop(0)
                await asyncio.sleep(rng.uniform(0.2, 1.5))
                await daemon.kill()
                await daemon.start()
            injected = dict(emu.faults.injected)
            emu.faults.off()
            await asyncio.sleep(3.0)  # the daemon's own jobs run with the faults off
            served_during_storm = emu.app.member_pages
            if not silent:
                emu.app.mall_includes = False  # the next poll or reconcile must fall back
                await asyncio.sleep(2.5)
        finally:
            code = await daemon.stop()
        assert code == 0, f"{replay}: daemon exit {code}\n{daemon.tail()}"
        before = plain = compare(db, emu)
        emu.data.silent_rate = 0.0
        rc = await run_logged("reconcile", "--config", str(cfg), env=env, log=daemon.log)
        assert rc == 0, f"{replay}: reconcile exit {rc}\n{daemon.tail()}"
        if silent:
            plain = compare(db, emu)
            rc = await run_logged(
                "reconcile", "--full", "--config", str(cfg), env=env, log=daemon.log
            )
            assert rc == 0, f"{replay}: reconcile --full exit {rc}\n{daemon.tail()}"
        result = compare(db, emu)
        lost = injected.get("webhook_lost", 0)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = conn.execute("select value from _sync_meta where key = 'mall_members'").fetchone()
        finally:
            conn.close()
        members = json.loads(row[0])["types"] if row else {}
        summary = (
            f"chaos summary: seed {plan.seed}; mutations {sum(ops.values())} ({ops}); "
            f"notices lost {lost} + {emu.dispatcher.auto_unsubscribed} auto-unsubscriptions + "
            f"{unsubscribed} removed by hand; forced logouts {logouts}; faults injected {injected}; "
            f"kills {daemon.starts - 1}; /malls member pages served {served_during_storm}, "
            f"last decision {sorted({(d['mode'], d['reason']) for d in members.values()})}; rows compared {result.rows_compared} "
            f"(and {result.links_compared} relationships, {result.sideloads_compared} sideloaded rows); "
            f"differences before the final reconcile {before.differences}; "
            + (f"after the plain reconcile {plain.differences}; " if silent else "")
            + f"differences {result.differences}"
        )
        with capsys.disabled():
            print("\n" + summary)
        assert daemon.starts - 1 == plan.kills
        if not silent:  # the fast path ran, then its fallback took over
            assert served_during_storm > 0
            assert members and all(d["mode"] == "per_mall" for d in members.values()), members
        if silent:
            assert ops["silent"] > 0
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                verify_runs = conn.execute(
                    "select started_at from _sync_jobs where name = 'verify'"
                ).fetchall()
            finally:
                conn.close()
            assert verify_runs and verify_runs[0][0], "the rolling verify never ran"
        assert result.rows_compared > plan.resources // 2
        assert result.sideloads_compared > 0
        assert result.differences == 0, f"{replay}: {result.summary()}\n{daemon.tail()}"
        leaks = _mirror_has_secret(db, [emu.password, SECRET])
        assert not leaks, leaks
        log = daemon.log.read_text(errors="replace")
        assert emu.password not in log and SECRET not in log
