"""The `sync` command line: parses arguments, loads the config, calls one library function.

All behaviour lives in the library modules; each command here only wires options to them. Every
`SyncError` becomes one line on stderr (exit 2 for configuration problems, 1 otherwise), never a
traceback.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from sync import __version__, logs
from sync.config import Settings, load_config
from sync.errors import ConfigError, SyncError

T = TypeVar("T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML configuration file (default ./sync.toml).",
)


def fail_cleanly(fn: Callable[..., T]) -> Callable[..., T]:
    """Turn SyncError into one stderr line and an exit code; Ctrl-C into exit 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"sync: configuration error: {exc}", err=True)
            sys.exit(2)
        except SyncError as exc:
            click.echo(f"sync: error: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("sync: interrupted", err=True)
            sys.exit(130)

    return wrapper


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion on a fresh event loop."""
    return asyncio.run(coro)


def settings_from(config_path: Path | None) -> Settings:
    """Load and validate the configuration (or raise ConfigError), and set up logging (stderr)."""
    settings = load_config(config_path)
    logs.configure(settings.logging.level, settings.logging.format)
    return settings


class _LazyGroup(click.Group):
    """A group whose commands are imported when used (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from sync.commands import COMMANDS

        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from sync.commands import COMMANDS

        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, _, attr = where.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sync")
def main() -> None:
    """Keep a local SQLite mirror of the Channel Content API up to date."""
