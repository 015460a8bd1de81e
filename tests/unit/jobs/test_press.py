"""`sync.jobs.press`: one mirroring of the press releases adds up rows and removals over every
configured locale (against the emulator's management API, tiny data)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sync.core.config import parse_config
from sync.emulator import Emulator
from sync.jobs.press import PressResult, mirror_press
from sync.store import Mirror

MakeEmulator = Callable[..., contextlib.AbstractAsyncContextManager[Emulator]]


async def test_rows_and_removals_are_summed_over_the_locales(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    async with make_emulator(resources=50, malls=2) as emu:
        management: dict[str, Any] = {
            "base_url": emu.base_url,
            "product": "loyalty",
            "loyalty_club": "demo-club",
            "bearer_token": emu.management.token,
            "locales": ["en", "de"],
            "per_page": 100,
        }
        settings = parse_config(
            {
                "upstream": {"base_url": emu.base_url, "email": "a@b.c", "password": "x"},
                "management": management,
            }
        ).management
        assert settings is not None
        total = len(emu.management.press)
        mirror = Mirror.open(tmp_path / "m.db")
        try:
            assert await mirror_press(mirror, settings) == PressResult(rows=2 * total, removed=0)
            for rid in sorted(emu.management.press)[:3]:
                del emu.management.press[rid]
            again = await mirror_press(mirror, settings, fail_fast=False)
            assert again == PressResult(rows=2 * (total - 3), removed=6)
            count = mirror.conn.execute("SELECT count(*) FROM mgmt_press_releases").fetchone()[0]
            assert count == 2 * (total - 3)
        finally:
            mirror.close()
