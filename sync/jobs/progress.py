"""Progress of long runs: a rich progress bar per type on a terminal, log lines otherwise.

The backfill reports through the small `Progress` protocol so it never knows which one it has;
tests use `NullProgress`.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol

from sync.core.logs import get_logger


class Progress(Protocol):
    """What a long run reports: per type, pages expected and rows written; `done` once a type
    completed (never for one stopped or failed midway)."""

    def add_pages(self, type_name: str, pages: int) -> None: ...
    def advance(self, type_name: str, rows: int, pages: int = 1) -> None: ...
    def done(self, type_name: str) -> None: ...
    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> None: ...


class NullProgress:
    """Reports nothing (tests, library use)."""

    def add_pages(self, type_name: str, pages: int) -> None:
        pass

    def advance(self, type_name: str, rows: int, pages: int = 1) -> None:
        pass

    def done(self, type_name: str) -> None:
        pass

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class LogProgress:
    """One structured log line per type every `every` seconds, and one when a type is done."""

    def __init__(self, every: float = 10.0) -> None:
        self._log = get_logger("sync.progress")
        self._every = every
        self._state: dict[
            str, list[float]
        ] = {}  # type -> [pages_total, pages_done, rows, t0, t_last]

    def add_pages(self, type_name: str, pages: int) -> None:
        now = time.monotonic()
        st = self._state.setdefault(type_name, [0, 0, 0, now, now])
        st[0] += pages

    def advance(self, type_name: str, rows: int, pages: int = 1) -> None:
        now = time.monotonic()
        st = self._state.setdefault(type_name, [0, 0, 0, now, now])
        st[1] += pages
        st[2] += rows
        if now - st[4] >= self._every:
            st[4] = now
            self._emit("backfill.progress", type_name, st, now)

    def done(self, type_name: str) -> None:
        now = time.monotonic()
        st = self._state.get(type_name)
        if st is not None:
            self._emit("backfill.type_done", type_name, st, now)

    def _emit(self, event: str, type_name: str, st: list[float], now: float) -> None:
        elapsed = max(now - st[3], 1e-9)
        self._log.info(
            event,
            type=type_name,
            pages=int(st[1]),
            pages_total=int(st[0]),
            rows=int(st[2]),
            rows_per_s=round(st[2] / elapsed, 1),
        )

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class RichProgress:
    """A rich progress bar per type: pages done of pages known, rows, rate and ETA, in 80
    columns (`WIDTH`) at a million rows a type."""

    #: The width the bars fit in: a type name (ellipsized past 14 characters), a short bar,
    #: `12,345/12,345` pages, 7 digits of rows, a rate and the ETA.
    WIDTH = 80

    def __init__(self, console: Any = None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _RichProgress
        from rich.table import Column

        self._bar = _RichProgress(
            TextColumn(
                "{task.description}",
                table_column=Column(width=14, no_wrap=True, overflow="ellipsis"),
            ),
            BarColumn(bar_width=10),
            MofNCompleteColumn(),
            TextColumn("pages {task.fields[rows]:>9,} rows {task.fields[rate]:>7}/s"),
            TimeRemainingColumn(),
            transient=False,
            console=console,
        )
        self._tasks: dict[str, Any] = {}
        self._rows: dict[str, int] = {}
        self._t0: dict[str, float] = {}

    def table(self) -> Any:
        """The bars as rendered now (a rich renderable)."""
        return self._bar.make_tasks_table(self._bar.tasks)

    def _task(self, type_name: str) -> Any:
        if type_name not in self._tasks:
            self._tasks[type_name] = self._bar.add_task(type_name, total=0, rows=0, rate="-")
            self._rows[type_name] = 0
            self._t0[type_name] = time.monotonic()
        return self._tasks[type_name]

    def add_pages(self, type_name: str, pages: int) -> None:
        task = self._task(type_name)
        total = self._bar.tasks[task].total or 0
        self._bar.update(task, total=total + pages)

    def advance(self, type_name: str, rows: int, pages: int = 1) -> None:
        task = self._task(type_name)
        self._rows[type_name] += rows
        elapsed = max(time.monotonic() - self._t0[type_name], 1e-9)
        rate = _rate(self._rows[type_name] / elapsed)
        self._bar.update(task, advance=pages, rows=self._rows[type_name], rate=rate)

    def done(self, type_name: str) -> None:
        task = self._task(type_name)
        total = self._bar.tasks[task].total or 0
        self._bar.update(task, completed=total)

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


def _rate(per_second: float) -> str:
    """A rate in at most 7 characters: `12,345`, `123k`, `1.2M`."""
    if per_second < 100_000:
        return f"{per_second:,.0f}"
    if per_second < 1_000_000:
        return f"{per_second / 1000:.0f}k"
    return f"{per_second / 1_000_000:.1f}M"[:7]


def for_terminal(quiet: bool = False) -> Progress:
    """A progress bar on a terminal, log lines otherwise, nothing when `quiet`."""
    if quiet:
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress()
    return LogProgress()
