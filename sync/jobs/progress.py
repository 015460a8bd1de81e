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
    columns (`WIDTH`) at a million rows a type.

    A type's total grows while it runs (each mall's scope adds its pages when its first page
    arrives), so pages done can catch up with pages known long before the type is: until `done`
    the bar stops at 99 % and the total reads `N+` once caught up."""

    #: The width the bars fit in: a type name (ellipsized past 14 characters), a short bar,
    #: `12,345/12,345` pages, 7 digits of rows, a rate and the ETA.
    WIDTH = 80
    #: The share a bar shows at most before its type is done.
    CAP = 0.99

    def __init__(self, console: Any = None) -> None:
        from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as _RichProgress
        from rich.table import Column

        self._bar = _RichProgress(
            TextColumn(
                "{task.description}",
                table_column=Column(width=14, no_wrap=True, overflow="ellipsis"),
            ),
            BarColumn(bar_width=10),
            TextColumn("{task.fields[pages]}", justify="right"),
            TextColumn("pages {task.fields[rows]:>9,} rows {task.fields[rate]:>7}/s"),
            TimeRemainingColumn(),
            transient=False,
            console=console,
        )
        self._tasks: dict[str, Any] = {}
        self._rows: dict[str, int] = {}
        self._t0: dict[str, float] = {}
        # Per type: [pages known, pages done]; the bar is drawn from them (`_draw`).
        self._pages: dict[str, list[int]] = {}
        self._done: set[str] = set()

    def table(self) -> Any:
        """The bars as rendered now (a rich renderable)."""
        return self._bar.make_tasks_table(self._bar.tasks)

    def _task(self, type_name: str) -> Any:
        if type_name not in self._tasks:
            self._tasks[type_name] = self._bar.add_task(
                type_name, total=0, rows=0, rate="-", pages="0/0"
            )
            self._rows[type_name] = 0
            self._t0[type_name] = time.monotonic()
            self._pages[type_name] = [0, 0]
        return self._tasks[type_name]

    def _draw(self, type_name: str, **fields: Any) -> None:
        """The bar of `type_name` from its pages: capped at `CAP` and the total `N+` while the
        type is not done."""
        task = self._task(type_name)
        total, done = self._pages[type_name]
        finished = type_name in self._done
        shown = done if finished else min(done, total * self.CAP)
        growing = "+" if not finished and total and done >= total else ""
        self._bar.update(
            task, total=total, completed=shown, pages=f"{done}/{total}{growing}", **fields
        )

    def add_pages(self, type_name: str, pages: int) -> None:
        self._task(type_name)
        self._pages[type_name][0] += pages
        self._draw(type_name)

    def advance(self, type_name: str, rows: int, pages: int = 1) -> None:
        self._task(type_name)
        self._rows[type_name] += rows
        self._pages[type_name][1] += pages
        elapsed = max(time.monotonic() - self._t0[type_name], 1e-9)
        rate = _rate(self._rows[type_name] / elapsed)
        self._draw(type_name, rows=self._rows[type_name], rate=rate)

    def done(self, type_name: str) -> None:
        self._task(type_name)
        self._done.add(type_name)
        counts = self._pages[type_name]
        counts[0] = counts[1] = max(counts)  # a type done has read every page it knows
        self._draw(type_name)

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
