"""`ccsync demo`: the bundled emulator with a steady stream of changes, and the daemon following it.

Everything runs in one process on loopback: the emulator on a free port, the daemon with its
webhook receiver on another, subscribed to every type. A status line every 3 s from the start
shows the rows mirrored (every resource, included ones such as images too), then the queue depth
and the changes applied upstream; on Ctrl-C (or after `--duration`) it stops
cleanly and leaves the mirror file and a `sync.toml` beside it for `ccsync status` and `sqlite3`.
Each demo starts from a fresh mirror (`fresh_mirror`): an earlier demo's followed another
emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import sys
import time
from pathlib import Path

import click

from sync.core.config import Settings, parse_config
from sync.core.errors import MirrorError
from sync.daemon.service import Daemon
from sync.emulator import Emulator
from sync.jobs.progress import NullProgress
from sync.model import catalogue
from sync.store import MirrorStore
from sync.store.lock import holder_file, holder_pid

#: The demo's mirror, in its `--dir`.
MIRROR_FILE = "mirror.db"


def demo_settings(emu: Emulator, directory: Path, secret: str) -> Settings:
    """Settings for a daemon following `emu` on loopback, with short intervals for the demo."""
    data = {
        "upstream": {
            "base_url": emu.base_url,
            "email": emu.email,
            "password": emu.password,
            "concurrency": 4,
        },
        "mirror": {"path": str(directory / MIRROR_FILE)},
        "webhooks": {"enabled": True, "listen": "127.0.0.1:0", "secret": secret},
        "schedule": {
            "poll_interval": 10.0,
            "deletions_interval": 10.0,
            "hours_interval": 600.0,
            "subscriptions_interval": 15.0,
        },
        "logging": {"level": "warning", "format": "console"},
    }
    return parse_config(data)


#: The first line of the sync.toml a demo leaves: how the next demo knows the mirror is a demo's.
WRITTEN_BY = "# Written by `ccsync demo`"


def write_config(settings: Settings, emu: Emulator, path: Path) -> None:
    """A sync.toml for the demo mirror, so `ccsync status --config` works afterwards."""
    path.write_text(
        f"{WRITTEN_BY}: the emulator it points at is gone once the demo stops.\n"
        "[upstream]\n"
        f'base_url = "{emu.base_url}"\n'
        f'email = "{emu.email}"\n'
        f'password = "{emu.password}"  # the emulator\'s own demo account\n'
        "[mirror]\n"
        f'path = "{settings.mirror.path}"\n'
        "[webhooks]\nenabled = false\n"
    )


def fresh_mirror(path: Path) -> str | None:
    """Make way for a new demo mirror at `path`; what was done, in words, or None (no file).

    A mirror left by an earlier demo followed an emulator that is gone: its rows, cursors and
    completed types describe another upstream's history (the new emulator starts from its seed
    again, without the old one's changes), so the daemon would poll on from stale cursors and
    never notice what is missing. The demo starts afresh: a previous demo's mirror (its
    sync.toml beside it says so) is removed with its `-wal`, `-shm` and `.lock`; any other file
    there is moved aside, never removed. One that a process holds is refused."""
    if not path.exists():
        return None
    pid = holder_pid(path)
    if pid is not None:
        raise MirrorError(
            f"mirror {path} is in use by process {pid} (another `ccsync demo`?)",
            hint="stop it, or give this demo another --dir",
        )
    parts = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    config = path.parent / "sync.toml"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if config.read_text(encoding="utf-8").startswith(WRITTEN_BY):
            for part in (*parts, holder_file(path)):
                part.unlink(missing_ok=True)
            return (
                f"removed the previous demo's {path}: it followed an emulator that is gone; "
                "this demo starts a fresh mirror"
            )
    aside = path.with_name(f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}")
    for part in parts:
        if part.exists():
            part.rename(Path(str(aside) + str(part)[len(str(path)) :]))
    holder_file(path).unlink(missing_ok=True)
    return f"moved {path} aside to {aside} (no demo wrote it); this demo starts a fresh mirror"


async def mutate(emu: Emulator, per_second: float, stop: asyncio.Event, counter: list[int]) -> None:
    """Apply random creates, updates and deletes upstream at a steady rate."""
    rng = random.Random(1)
    while not stop.is_set():
        emu.mutate_randomly(1, rng.randrange(1 << 30))
        counter[0] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=1.0 / per_second)


#: Seconds between two status lines, from the start (the backfill included).
STATUS_EVERY = 3.0


def mirrored_rows(mirror: MirrorStore) -> int:
    """Rows of every resource type in the mirror: the mirrored types and the resources they
    include (images, tags...), so the count compares with the emulator's `--resources`."""
    return sum(
        mirror.table(name).count() for name in catalogue.TYPES if mirror.schema.has_table(name)
    )


def status_line(
    mirror: MirrorStore, emu: Emulator, changes: int, elapsed: float, *, queue: int | None = None
) -> str:
    """One demo status line: while backfilling (no `queue` yet), then while following the
    upstream with `queue` notices waiting."""
    rows = mirrored_rows(mirror)
    if queue is None:
        return f"[{elapsed:6.0f}s] backfilling: rows {rows:>7,}"
    return (
        f"[{elapsed:6.0f}s] rows {rows:>7,}  upstream changes {changes:>5}  queue {queue:>3}  "
        f"webhooks {len(emu.webhooks())} topics"
    )


def program() -> str:
    """This command as it was run (`.venv/bin/ccsync`, a path, or `python -m sync`), so a
    printed hint runs as printed."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name == "ccsync":
        return argv0
    return f"{sys.executable} -m sync"


async def run_demo(
    directory: Path,
    *,
    resources: int = 5000,
    mutations_per_second: float = 5.0,
    duration: float | None = None,
    echo: bool = True,
) -> Path:
    """Run the demo until Ctrl-C or `duration` seconds; return the mirror path."""
    directory.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before serving
    done = fresh_mirror(directory / MIRROR_FILE)
    if done and echo:
        click.echo(f"demo: {done}")
    emu = Emulator(resources=resources, seed=1)
    async with emu.serve(port=0):
        settings = demo_settings(emu, directory, secrets.token_urlsafe(24))
        write_config(settings, emu, directory / "sync.toml")
        daemon = Daemon(settings, progress=NullProgress())
        if echo:
            click.echo(f"emulator: {emu.base_url}  ({resources:,} resources, seed 1)")
            click.echo(f"mirror:   {settings.mirror.path}  (backfilling, then following changes)")
        task = asyncio.create_task(daemon.run())
        stop = daemon.stop
        counter = [0]
        mutator: asyncio.Task[None] | None = None
        t0 = time.monotonic()
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=STATUS_EVERY)
                if mutator is None and daemon.is_ready:
                    mutator = asyncio.create_task(mutate(emu, mutations_per_second, stop, counter))
                if task.done():
                    break
                running = daemon.running
                if echo and running is not None:
                    queue = running.queue.depth() if running.state.ready else None
                    elapsed = time.monotonic() - t0
                    click.echo(status_line(running.mirror, emu, counter[0], elapsed, queue=queue))
                if duration is not None and time.monotonic() - t0 >= duration:
                    break
        finally:
            daemon.request_stop()
            await task
            if mutator is not None:
                await mutator
    if echo:
        path = settings.mirror.path
        click.echo(f"\nmirror left at {path}; try:")
        click.echo(
            f"  sqlite3 {path} 'select id, title, updated_at from deals order by updated_at desc limit 5'"
        )
        click.echo(f"  {program()} status --config {directory / 'sync.toml'}")
    return settings.mirror.path
