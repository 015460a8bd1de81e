"""`sync.jobs.backfilling.backfill`: `Backfill.run(only=)` copies the named types (and the malls their
scopes need) and records its run; a type the account may not read is skipped, the run partial
(the emulator with tiny data)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from sync.channel.client import ChannelClient
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.store import Mirror
from tests.support.settings import settings_for

MakeEmulator = Callable[..., contextlib.AbstractAsyncContextManager[Emulator]]


def _runs(mirror: Mirror) -> list[tuple[str, str, str | None]]:
    rows = mirror.conn.execute("SELECT kind, status, error FROM _sync_runs ORDER BY id").fetchall()
    return [tuple(r) for r in rows]


def _ids(mirror: Mirror, table: str) -> list[str]:
    return [str(r[0]) for r in mirror.conn.execute(f"SELECT id FROM [{table}] ORDER BY id")]


async def test_only_the_named_types_are_copied_with_the_malls_they_need(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    async with make_emulator(resources=60, malls=2, seed=3) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=["malls", "stores", "events"])
        mirror = Mirror.open(settings.mirror.path)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                report = await Backfill(client, mirror, settings).run(only=["stores"])
            assert sorted(report.types) == ["malls", "stores"]
            assert _ids(mirror, "malls") == sorted(emu.ids("malls"), key=int)
            assert report.types["stores"].rows == len(_ids(mirror, "stores")) > 0
            held = {str(i) for i in _ids(mirror, "stores")}
            served = {i for m in emu.ids("malls") for i in emu.ids("stores", mall_id=m)}
            assert held == served
            assert not mirror.conn.execute(
                "SELECT name FROM sqlite_master WHERE name = 'events'"
            ).fetchall()
            assert _runs(mirror) == [("backfill", "ok", None)]
            cursors = mirror.conn.execute("SELECT type FROM _sync_cursors").fetchall()
            assert {r[0] for r in cursors} == {"malls", "stores", "deletions"}
        finally:
            mirror.close()


async def test_a_type_the_account_may_not_read_is_skipped_and_the_run_partial(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    async with make_emulator(resources=60, malls=2, seed=3, channels=["mall"]) as emu:
        settings = settings_for(emu, tmp_path / "m.db", types=["malls", "events", "deals"])
        mirror = Mirror.open(settings.mirror.path)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                report = await Backfill(client, mirror, settings).run()
            deals = report.types["deals"]
            assert deals.error is not None
            assert deals.error.startswith("not readable by this account (403); skipped: ")
            assert report.types["events"].error is None and report.types["events"].rows > 0
            ((kind, status, error),) = _runs(mirror)
            assert (kind, status) == ("backfill", "partial")
            assert error == f"deals: {deals.error}"
        finally:
            mirror.close()
