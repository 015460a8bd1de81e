"""The `sync` command line: parses arguments, loads the config, calls one library function.

All behaviour lives in the library modules; each command (`sync.commands`) only wires options to
them, with what every command shares (`sync.commands.wiring`: the options, the settings, one event
loop, `fail_cleanly`'s one stderr line and exit code). This module only imports the commands.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from sync import __version__
from sync.commands import COMMANDS
from sync.commands.wiring import config_option


class _LazyGroup(click.Group):
    """A group whose commands are imported when used (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, _, attr = where.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but a mistyped command names the closest ones (`Did you mean
        backfill?`): click suggests from `self.commands`, which the lazy table leaves empty."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ccsync")
@config_option
def main(config_path: Path | None) -> None:
    """Keep a local SQLite mirror of the Channel Content API up to date."""
