"""`ccsync demo` says what is true (#40): its status line counts every resource the emulator
serves (the included images, tags and groups too), prints while the backfill runs, and its exit
hint names the command as it was run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sync.daemon.demo import demo_settings, program, status_line
from sync.emulator import Emulator
from sync.model import catalogue
from sync.store import Mirror
from tests.support.backfilled import backfill


async def test_the_status_line_counts_every_resource_while_backfilling(
    emulator: Emulator, tmp_path: Path
) -> None:
    settings = demo_settings(emulator, tmp_path, "s" * 24)
    await backfill(emulator, settings.mirror.path)
    mirror = Mirror.open(settings.mirror.path, readonly=True)
    try:
        line = status_line(mirror, emulator, 0, 3.0)
        every = sum(mirror.table(t).count() for t in catalogue.TYPES if mirror.schema.has_table(t))
        listed = sum(mirror.table(t.name).count() for t in settings.upstream.mirrored_types())
    finally:
        mirror.close()
    assert "backfilling: rows" in line
    rows = int(line.split("rows")[1].replace(",", "").split()[0])
    assert rows == every and rows > listed  # the included images, tags and groups too
    # All the emulator serves but the images nothing includes (never served, never mirrored).
    assert rows >= 0.95 * sum(len(emulator.ids(t)) for t in catalogue.TYPES)


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        (".venv/bin/ccsync", ".venv/bin/ccsync"),
        ("/opt/sync/.venv/bin/ccsync", "/opt/sync/.venv/bin/ccsync"),
        ("/src/sync/__main__.py", f"{sys.executable} -m sync"),
    ],
)
def test_the_exit_hint_names_the_command_as_run(
    monkeypatch: pytest.MonkeyPatch, argv0: str, expected: str
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0, "demo"])
    assert program() == expected
