"""What every command shares: the `--config` and `--mirror` (with `--schema`) options, the settings they load,
one event loop per command, and `fail_cleanly`, which turns every `SyncError` into one stderr line
and an exit code: 2 for configuration problems, 3 for an upstream that cannot be reached at all, 4
for a mirror that cannot take writes (disk full, read-only, locked too long: `ccsync: <file>:
<cause>; <fix>`, whichever layer met it), 1 otherwise; a command stopped by SIGINT or SIGTERM exits
130 or 143 (128 + the signal) once its current page is committed or not.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from sync.core import logs
from sync.core.config import DEFAULT_PATH, Settings, load_config
from sync.core.errors import ConfigError, Interrupted, StorageFault, SyncError, UnreachableError
from sync.core.secrets import SecretsNeeded
from sync.core.target import DEFAULT_SCHEMA, SCHEMA_NAME, MirrorTarget
from sync.store.faults import storage_errors, storage_fault

T = TypeVar("T")

#: Exit code of a mirror that cannot take writes (`StorageFault`): the README's table has them all.
EXIT_STORAGE = 4
#: How a storage fault's fix ends for a one-shot command.
AGAIN = "then run the command again (nothing committed is lost)"

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML configuration file (default ./sync.toml).",
)

_mirror = click.option(
    "--mirror",
    "mirror_path",
    metavar="PATH|URL",
    default=None,
    help="The mirror to read: an SQLite file, or a PostgreSQL database "
    "(postgresql://user@host/dbname; its password, if any, is never shown; PGPASSWORD and "
    "~/.pgpass work too). No configuration file is needed (and none of its secrets is ever "
    "read). Wins over the configuration's [mirror] path or url.",
)
_schema = click.option(
    "--schema",
    "schema",
    metavar="NAME",
    default=None,
    help="The PostgreSQL schema of a --mirror URL (default: the configuration's [mirror] "
    f"schema, else {DEFAULT_SCHEMA}).",
)


def mirror_option(fn: Callable[..., T]) -> Callable[..., T]:
    """`--mirror PATH|URL` and `--schema NAME`, the reading commands' choice of mirror
    (`reader_from` makes it a `MirrorTarget`)."""
    return _mirror(_schema(fn))


def fail_cleanly(fn: Callable[..., T]) -> Callable[..., T]:
    """Turn SyncError into one stderr line and an exit code; Ctrl-C into exit 130, SIGTERM
    into 143; a storage fault SQLite or the OS raised anywhere below into exit 4."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"ccsync: configuration error: {exc}", err=True)
            sys.exit(2)
        except UnreachableError as exc:
            click.echo(f"ccsync: error: {exc}", err=True)
            sys.exit(3)
        except StorageFault as exc:
            click.echo(f"ccsync: {exc}", err=True)
            sys.exit(EXIT_STORAGE)
        except Interrupted as exc:
            click.echo(f"ccsync: {exc}", err=True)
            sys.exit(128 + exc.signum)
        except SyncError as exc:
            click.echo(f"ccsync: error: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("ccsync: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            # stdout closed early (`ccsync status | head -1`): quiet, and 128 + SIGPIPE like the
            # coreutils; point stdout at /dev/null so the interpreter's flush at exit is quiet.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(141)
        except storage_errors() as exc:
            # Met mid-run by a layer that only sees a connection (a page write, an index
            # build): named here, with the mirror the command was given.
            fault = storage_fault(exc, _mirror_path(), then=AGAIN)
            if fault is None:
                raise
            click.echo(f"ccsync: {fault}", err=True)
            sys.exit(EXIT_STORAGE)

    return wrapper


def _mirror_path() -> str:
    """The mirror of the running command (`settings_from` notes it), or a stand-in."""
    ctx = click.get_current_context(silent=True)
    path = ctx.find_root().meta.get("sync.mirror") if ctx is not None else None
    return str(path) if path else "the mirror"


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion on a fresh event loop; SIGTERM cancels it.

    Python's default for SIGTERM kills the process where it stands; here it cancels the
    command instead (like asyncio's own handling of Ctrl-C), so a retry's backoff or a stalled
    request ends at once, `finally` blocks close the mirror, and the command exits 143
    (`Interrupted`). The daemon installs its own handlers and exits 0.
    """
    return asyncio.run(_cancel_on_sigterm(coro))


async def _cancel_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    stopped: list[int] = []

    def stop() -> None:
        stopped.append(signal.SIGTERM)
        # A second SIGTERM gets Python's default (end the process) should the first hang.
        loop.remove_signal_handler(signal.SIGTERM)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    try:
        return await coro
    except asyncio.CancelledError:
        if stopped:
            raise Interrupted(signal.SIGTERM) from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def settings_from(config_path: Path | None, *, secrets: SecretsNeeded = "upstream") -> Settings:
    """Load and validate the configuration (or raise ConfigError), and set up logging (stderr).

    `--config` works before the command too (`ccsync --config F status`); given after, it wins.
    `secrets` names the secrets the command reads (`sync.core.secrets.SecretsNeeded`): by
    default every one but the webhook secret, which only the receiver's commands resolve."""
    settings = load_config(_config_path(config_path), secrets=secrets)
    logs.configure(settings.logging.level, settings.logging.format)
    _note_mirror(settings.mirror.target)
    return settings


def reader_from(
    config_path: Path | None, mirror: str | Path | None, schema: str | None = None
) -> tuple[MirrorTarget, Settings | None]:
    """The mirror a reading command reads, and the configuration if one was given or found.

    `--mirror PATH|URL` alone needs no configuration file; with one, the file's settings
    (logging, the request budget shown, `[mirror] schema` for a URL without `--schema`) still
    apply, but its secrets are never resolved: a shell user reads the mirror of a service whose
    password and webhook secret are systemd credentials."""
    if schema is not None and not SCHEMA_NAME.fullmatch(schema):
        raise click.BadParameter(
            "use a plain lowercase schema name: letters, digits and _, not starting with a "
            f"digit, at most 63 characters (e.g. {DEFAULT_SCHEMA})",
            param_hint="--schema",
        )
    explicit = _config_path(config_path)
    settings = None
    if mirror is None or explicit is not None:  # --mirror alone: no ./sync.toml is looked for
        settings = settings_from(explicit, secrets="none")
    else:
        logs.configure()
    if mirror is None:
        assert settings is not None
        target = settings.mirror.target
        if schema is not None and target.url is not None:
            target = MirrorTarget(url=target.url, schema=schema)
    else:
        default = settings.mirror.schema_ if settings is not None else DEFAULT_SCHEMA
        target = MirrorTarget.parse(mirror, schema=schema or default)
    _note_mirror(target)
    return target, settings


def config_file(config_path: Path | None) -> Path:
    """The configuration file a command reads: `--config` (after or before the command), else
    ./sync.toml."""
    return _config_path(config_path) or DEFAULT_PATH


def _config_path(config_path: Path | None) -> Path | None:
    """`--config` given after the command, else before it (`ccsync --config F status`)."""
    if config_path is None:
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            config_path = ctx.find_root().params.get("config_path")
    return config_path


def _note_mirror(target: MirrorTarget) -> None:
    """Remember the command's mirror for `fail_cleanly`'s storage fault lines: its path, or
    its URL with the password masked (`MirrorTarget.describe`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().meta["sync.mirror"] = target.describe()
