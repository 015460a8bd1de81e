"""sync.daemon.demo: its settings, the sync.toml it leaves, a fresh mirror each time, its status
lines, the mutator."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sync.core.config import parse_config
from sync.core.errors import MirrorError
from sync.daemon.demo import demo_settings, fresh_mirror, mutate, status_line, write_config
from sync.store import Mirror

EMU: Any = SimpleNamespace(
    base_url="http://127.0.0.1:4321",
    email="demo@example.com",
    password="demo-pass",
    webhooks=lambda: ["deals", "stores"],
)


def test_the_demo_follows_on_loopback_with_short_intervals(tmp_path: Path) -> None:
    settings = demo_settings(EMU, tmp_path, "x" * 32)
    assert settings.mirror.path == tmp_path / "mirror.db"
    assert (settings.webhooks.enabled, settings.webhooks.host, settings.webhooks.port) == (
        True,
        "127.0.0.1",
        0,
    )
    assert settings.schedule.poll_interval == 10.0 and settings.upstream.concurrency == 4


def test_the_config_left_behind_reads_the_same_mirror_without_webhooks(tmp_path: Path) -> None:
    settings = demo_settings(EMU, tmp_path, "x" * 32)
    write_config(settings, EMU, tmp_path / "sync.toml")
    text = (tmp_path / "sync.toml").read_text()
    assert text.startswith("# Written by `ccsync demo`")
    again = parse_config(tomllib.loads(text))
    assert again.mirror.path == settings.mirror.path and again.webhooks.enabled is False
    assert str(again.upstream.base_url).rstrip("/") == EMU.base_url
    assert "x" * 32 not in text  # the webhook secret is not written


def test_status_lines_count_every_table_of_a_type_before_and_after_the_backfill(
    mirror: Mirror,
) -> None:
    mirror.conn.execute("CREATE TABLE deals (id INTEGER PRIMARY KEY)")
    mirror.conn.execute("CREATE TABLE images (id INTEGER PRIMARY KEY)")
    mirror.conn.executemany("INSERT INTO deals (id) VALUES (?)", [(i,) for i in range(1, 1201)])
    mirror.conn.execute("INSERT INTO images (id) VALUES (1)")
    assert status_line(mirror, EMU, 0, 2.6) == "[     3s] backfilling: rows   1,201"
    assert status_line(mirror, EMU, 17, 63.0, queue=4) == (
        "[    63s] rows   1,201  upstream changes    17  queue   4  webhooks 2 topics"
    )


async def test_the_mutator_changes_the_upstream_until_stopped() -> None:
    stop = asyncio.Event()
    seeds: list[int] = []

    def mutate_randomly(n: int, seed: int) -> None:
        assert n == 1
        seeds.append(seed)
        if len(seeds) == 3:
            stop.set()

    counter = [0]
    emu: Any = SimpleNamespace(mutate_randomly=mutate_randomly)
    await mutate(emu, 1e6, stop, counter)
    assert counter == [3] and len(seeds) == 3
    again: list[int] = []
    stop.clear()
    emu = SimpleNamespace(mutate_randomly=lambda n, seed: (again.append(seed), stop.set()))
    await mutate(emu, 1e6, stop, [0])
    assert again == seeds[:1]  # the same sequence each run (seeded)


def test_a_second_demo_starts_from_a_fresh_mirror_and_says_so(tmp_path: Path) -> None:
    """The old demo mirror followed an emulator that is gone (#48): removed, with its -wal,
    -shm and .lock, once its own sync.toml says a demo wrote it; nothing there: nothing said."""
    settings = demo_settings(EMU, tmp_path, "x" * 32)
    assert fresh_mirror(settings.mirror.path) is None
    Mirror.open(settings.mirror.path).close()
    write_config(settings, EMU, tmp_path / "sync.toml")
    said = fresh_mirror(settings.mirror.path)
    assert said is not None and said.startswith(
        f"removed the previous demo's {settings.mirror.path}"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sync.toml"]


def test_a_mirror_no_demo_wrote_is_moved_aside_never_removed(tmp_path: Path) -> None:
    db = tmp_path / "mirror.db"
    Mirror.open(db).close()
    (tmp_path / "sync.toml").write_text("[upstream]\n")  # someone's own configuration
    said = fresh_mirror(db)
    assert said is not None and said.startswith(f"moved {db} aside to {db}.")
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("mirror.db.")]
    assert not db.exists() and aside.stat().st_size > 0


def test_a_mirror_in_use_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "mirror.db"
    held = Mirror.open(db)
    try:
        with pytest.raises(MirrorError, match="in use by process"):
            fresh_mirror(db)
        assert db.exists()
    finally:
        held.close()
