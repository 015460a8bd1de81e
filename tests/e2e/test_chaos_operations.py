"""Convergence under real operations: the shipped default schedule, restarts more often than
the poll interval, and small churny tables that lose a quarter of their rows while the daemon
is down.

The storm of `test_chaos.py` runs every job every few seconds; an operator runs the defaults
(`poll_interval` 60 s, `staleness_bound` an hour). Here the daemon keeps those, is restarted
(SIGTERM, now and then SIGKILL) every 4-8 s during a storm of changes with faults on, so no
interval ever elapses inside one life: whatever it learns it learns from webhooks and from the
catch-up every start does at once. Then, with the daemon stopped, a quarter of the contacts
and mall messages (~100-row tables) are deleted upstream; the restarted daemon must drop them
from the deletions feed within seconds, with no reconcile due. Last, one `ccsync reconcile` under
the shipped mass-delete guard (20 %) must refuse nothing and leave 0 differences, and a
`ccsync reconcile --full` after it as well.

Size: SYNC_CHAOS_OPS_MUTATIONS (300), SYNC_CHAOS_OPS_RESOURCES (3000), SYNC_CHAOS_SEED.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from sync.emulator import Emulator
from tests.support.chaos import SECRET, chaos_config, env_int, storm_faults
from tests.support.compare import compare
from tests.support.ports import free_port
from tests.support.processes import DaemonProcess, run_logged

SMALL_TABLES = ("contacts", "mall_messages")


@pytest.mark.slow
async def test_converges_with_the_shipped_schedule_restarts_and_small_churny_tables(
    make_emulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = env_int("SYNC_CHAOS_SEED", random.randrange(1 << 30))
    rng = random.Random(seed)
    replay = f"replay with SYNC_CHAOS_SEED={seed}"
    mutations = env_int("SYNC_CHAOS_OPS_MUTATIONS", 300)
    resources = env_int("SYNC_CHAOS_OPS_RESOURCES", 3000)
    rate = 20.0
    async with make_emulator(resources=resources, seed=seed % 100_000) as emu:
        assert isinstance(emu, Emulator)
        db = tmp_path / "mirror.db"
        cfg = chaos_config(tmp_path, emu, db, free_port(), schedule=None)  # the shipped defaults
        env = {"CHAOS_PW": emu.password, "CHAOS_SECRET": SECRET}
        daemon = DaemonProcess(cfg, env, tmp_path / "daemon.log")
        storm_faults(emu)
        await daemon.start()
        t0 = time.monotonic()
        next_restart = rng.uniform(4.0, 8.0)
        kills = 0
        try:
            for step in range(mutations):
                emu.mutate_randomly(1, rng.randrange(1 << 30))
                if time.monotonic() - t0 >= next_restart:
                    if rng.random() < 0.3:
                        await daemon.kill()
                        kills += 1
                    else:
                        code = await daemon.stop()
                        assert code == 0, f"{replay}: exit {code} on SIGTERM\n{daemon.tail()}"
                    await daemon.start()
                    next_restart = time.monotonic() - t0 + rng.uniform(4.0, 8.0)
                delay = (step + 1) / rate - (time.monotonic() - t0)
                await asyncio.sleep(max(delay, 0.0))
            emu.faults.off()
            await asyncio.sleep(2.0)
        finally:
            code = await daemon.stop()
        assert code == 0, f"{replay}: daemon exit {code}\n{daemon.tail()}"

        # While the daemon is down, a quarter of each small table goes, and a few rows change.
        gone: dict[str, list[str]] = {}
        for t in SMALL_TABLES:
            ids = list(emu.ids(t))
            gone[t] = [str(i) for i in rng.sample(ids, len(ids) // 4)]
            for rid in gone[t]:
                emu.delete(t, rid)
        for _ in range(20):
            emu.mutate_randomly(1, rng.randrange(1 << 30))

        # A restart catches up at once: the deletions feed and the polls run on start, though
        # no interval has elapsed and no reconcile is due.
        await daemon.start()
        caught_up = None
        try:
            deadline = time.monotonic() + 45.0
            while time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                small = compare(db, emu, types=list(SMALL_TABLES))
                if small.differences == 0:
                    caught_up = time.monotonic() - (deadline - 45.0)
                    break
        finally:
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(daemon.proc.wait(), 60) == 0, daemon.tail()
        assert caught_up is not None, (
            f"{replay}: small tables not caught up 45 s after a restart: "
            f"{compare(db, emu, types=list(SMALL_TABLES)).summary()}\n{daemon.tail()}"
        )

        before = compare(db, emu)
        rc = await run_logged("reconcile", "--config", str(cfg), env=env, log=daemon.log)
        assert rc == 0, f"{replay}: reconcile exit {rc} (refused?)\n{daemon.tail()}"
        result = compare(db, emu)
        with capsys.disabled():
            print(
                f"\nchaos (shipped schedule) summary: seed {seed}; mutations {mutations + 20}; "
                f"restarts {daemon.starts - 1} ({kills} by SIGKILL); small tables "
                f"{ {t: len(v) for t, v in gone.items()} } deleted while down, caught up "
                f"{caught_up:.1f} s after the restart; differences before reconcile "
                f"{before.differences}, after {result.differences}"
            )
        assert daemon.starts - 1 >= 2
        assert result.differences == 0, f"{replay}: {result.summary()}\n{daemon.tail()}"
        # A full verify after it finds nothing left to repair and changes nothing.
        rc = await run_logged("reconcile", "--full", "--config", str(cfg), env=env, log=daemon.log)
        assert rc == 0, f"{replay}: reconcile --full exit {rc}\n{daemon.tail()}"
        full = compare(db, emu)
        assert full.differences == 0, f"{replay}: {full.summary()}\n{daemon.tail()}"
