"""The backfill's progress (#40): the bar fits an 80-column terminal with its ETA whole, and a
resumed run's summary adds up to what its progress showed."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sync.channel.client import ChannelClient
from sync.core.errors import UnreachableError
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.jobs.progress import RichProgress
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.settings import make_settings


def test_the_progress_bar_fits_80_columns_with_its_eta() -> None:
    out = io.StringIO()
    console = Console(file=out, width=RichProgress.WIDTH, force_terminal=True, color_system=None)
    bar = RichProgress(console=console)
    for name in ("press_releases", "mgmt_press_releases", "deals"):
        bar.add_pages(name, 99_999)
        bar.advance(name, 9_999_999, pages=50_000)
    console.print(bar.table())
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 3, lines
    for line in lines:
        assert len(line) <= RichProgress.WIDTH, line
        assert "…" not in line.split()[-1], line  # the ETA whole, not `0:00:…`
        assert re.search(r"\d+:\d\d:\d\d$|-:--:--$", line.rstrip()), line
        assert "50000/99999 pages 9,999,999 rows" in line, line


class Recorded:
    """A `Progress` that keeps the pages and rows each type advanced by."""

    def __init__(self) -> None:
        self.pages: dict[str, int] = {}
        self.rows: dict[str, int] = {}
        self.done_types: list[str] = []

    def add_pages(self, type_name: str, pages: int) -> None:
        pass

    def advance(self, type_name: str, rows: int, pages: int = 1) -> None:
        self.pages[type_name] = self.pages.get(type_name, 0) + pages
        self.rows[type_name] = self.rows.get(type_name, 0) + rows

    def done(self, type_name: str) -> None:
        self.done_types.append(type_name)

    def __enter__(self) -> Recorded:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


async def test_a_resumed_backfill_reports_the_pages_its_progress_showed(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Interrupted after a few pages, then resumed: the report's pages of this run plus the
    pages resumed are the pages the progress lines counted (the summary and the log agree)."""
    db = tmp_path / "m.db"
    settings = make_settings(emulator, db, types=["articles"], page_size=5, concurrency=1)
    calls = {"n": 0}

    def wrap(client: ChannelClient) -> None:
        real = client.list_response

        async def list_response(rtype: Any, number: int, **kw: Any) -> Any:
            calls["n"] += 1
            if calls["n"] > 4:
                raise UnreachableError("gone", url="x")
            return await real(rtype, number, **kw)

        client.list_response = list_response  # type: ignore[method-assign]

    with pytest.raises(UnreachableError):
        await run_backfill(settings, wrap=wrap)
    progress = Recorded()
    mirror = Mirror.open(db)
    try:
        async with ChannelClient(settings.upstream) as client:
            report = await Backfill(client, mirror, settings, progress=progress).run()
    finally:
        mirror.close()
    t = report.types["articles"]
    assert t.resumed >= 3 and t.pages >= 1
    assert progress.pages["articles"] == t.pages + t.resumed


async def test_only_the_types_that_completed_are_reported_done(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A run stopped midway (Ctrl-C, an upstream gone) logs no `backfill.type_done` for the
    types it did not finish: `done` only follows a type's completion."""
    settings = make_settings(
        emulator, tmp_path / "m.db", types=["malls", "articles"], page_size=5, concurrency=1
    )
    progress = Recorded()
    mirror = Mirror.open(settings.mirror.path)
    try:
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            real = client.list_response

            async def list_response(listing: Any, number: int, **kw: Any) -> Any:
                if listing.scope.rtype.name == "articles" and number > 2:
                    raise UnreachableError("gone", url="x")
                return await real(listing, number, **kw)

            client.list_response = list_response  # type: ignore[method-assign]
            with pytest.raises(UnreachableError):
                await Backfill(client, mirror, settings, progress=progress).run()
    finally:
        mirror.close()
    assert progress.pages["articles"] >= 1
    assert progress.done_types == ["malls"]
