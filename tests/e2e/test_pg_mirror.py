"""The PostgreSQL mirror end to end (#49): a backfill of the emulator into a private
PostgreSQL server, exact row for row, link for link (checked through an SQLite copy of the
schema, `tests.support.pgcopy`, by the suites' own `compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.core.config import parse_config
from sync.core.target import MirrorTarget
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.proving.proof import run_proof_cycle
from sync.jobs.proving.verify import run_verify
from sync.model import catalogue
from sync.store.opening import open_mirror
from sync.store.pg.lock import ActiveLock
from tests.e2e.test_verify import TYPES_MIRRORED, silent_changes
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.pgcopy import copy_to_sqlite
from tests.support.processes import CLI_PASSWORD_ENV, ccsync
from tests.support.settings import make_settings, upstream_keys, write_config

SCHEMA = "ccsync"


async def test_a_backfill_into_postgresql_is_exact(
    emulator: Emulator, pg_db: str, tmp_path: Path
) -> None:
    settings = make_settings(emulator, tmp_path / "unused.db")
    mirror = open_mirror(MirrorTarget(url=pg_db, schema=SCHEMA))
    try:
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            report = await Backfill(client, mirror, settings).run()
    finally:
        mirror.close()
    copy = copy_to_sqlite(pg_db, SCHEMA, tmp_path / "copy.db")
    result = compare(copy, emulator)
    assert result.differences == 0, result.summary()
    assert result.rows_compared == sum(len(emulator.snapshot(t)) for t in catalogue.LISTABLE)
    assert report.rows >= result.rows_compared


async def test_the_commands_backfill_and_read_a_postgresql_mirror_as_a_user_runs_them(
    emulator: Emulator, pg_db: str, tmp_path: Path
) -> None:
    """`[mirror] url` in the file: `ccsync backfill` fills the schema, `ccsync status` reads it
    (who is active and who stands by, from the server), a second writer is refused naming the
    holder, and `--mirror URL --schema` reads it with no configuration; no password shown."""
    config = write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(emulator, CLI_PASSWORD_ENV, types=["malls", "deals"]),
        mirror={"url": pg_db, "schema": "shop"},
        logging={"level": "warning"},
    )
    code, out, err = await ccsync("backfill", "--quiet", "--config", str(config), emu=emulator)
    assert code == 0, err
    code, out, err = await ccsync("status", "--config", str(config), emu=emulator)
    assert code == 0, err
    assert "deals" in out and "active daemon: none" in out and "standby daemon: none" in out
    lock = ActiveLock(pg_db, "shop")
    assert lock.try_acquire()
    try:
        code, out, err = await ccsync("backfill", "--quiet", "--config", str(config), emu=emulator)
        assert code != 0 and "another ccsync writes this mirror" in err, (code, err)
        code, out, err = await ccsync("status", "--mirror", pg_db, "--schema", "shop", emu=emulator)
        assert code == 0, err
        assert f"active daemon: {lock.name}" in out
    finally:
        lock.release()
    copy = copy_to_sqlite(pg_db, "shop", tmp_path / "copy.db")
    assert compare(copy, emulator, ["malls", "deals"]).differences == 0


async def test_the_proof_and_the_full_verify_end_a_postgresql_mirror_exact(
    make_emulator: Any, pg_db: str, tmp_path: Path
) -> None:
    """Changes while no daemon ran (updates, deletions in the feed, silent edits under an
    unchanged stamp): `ccsync reconcile`'s cycle, then its `--full` verify, leave the
    PostgreSQL mirror exact."""
    async with make_emulator(resources=600, seed=31) as emu:
        settings = parse_config(
            {
                "upstream": {
                    "base_url": emu.base_url,
                    "email": emu.email,
                    "password": emu.password,
                    "types": TYPES_MIRRORED,
                    "max_backoff": 0.05,
                },
                "mirror": {"url": pg_db, "schema": SCHEMA},
                "webhooks": {"enabled": False},
                "logging": {"level": "warning"},
            }
        )
        await run_backfill(settings)
        copy = tmp_path / "copy.db"
        assert compare(copy_to_sqlite(pg_db, SCHEMA, copy), emu).differences == 0
        for rid in emu.ids("deals")[:5]:
            emu.update("deals", rid, {"title": "changed while down"})
        for rid in emu.ids("contacts")[:3]:
            emu.delete("contacts", rid)
        silent_changes(emu)
        assert compare(copy_to_sqlite(pg_db, SCHEMA, copy), emu).differences > 0
        _, unresolved = await run_proof_cycle(settings)
        assert unresolved == []
        report = await run_verify(settings)
        assert report is not None
        result = compare(copy_to_sqlite(pg_db, SCHEMA, copy), emu)
        assert result.differences == 0, result.summary()
