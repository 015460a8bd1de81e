"""The PostgreSQL mirror end to end (#49): a backfill of the emulator into a private
PostgreSQL server, exact row for row, link for link (checked through an SQLite copy of the
schema, `tests.support.pgcopy`, by the suites' own `compare`)."""

from __future__ import annotations

from pathlib import Path

from sync.channel.client import ChannelClient
from sync.core.target import MirrorTarget
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.model import catalogue
from sync.store.opening import open_mirror
from tests.support.compare import compare
from tests.support.pgcopy import copy_to_sqlite
from tests.support.settings import make_settings

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
