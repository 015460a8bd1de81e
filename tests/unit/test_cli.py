"""sync.cli: the `ccsync` group: its version, help, the lazy command table and unknown commands."""

from __future__ import annotations

import click
from click.testing import CliRunner

from sync import __version__
from sync.cli import main
from sync.commands import COMMANDS


def test_version_names_the_program() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"ccsync, version {__version__}\n")


def test_short_and_long_help_list_every_command_once() -> None:
    for flag in ("-h", "--help"):
        result = CliRunner().invoke(main, [flag])
        assert result.exit_code == 0
        listed = [
            line.split()[0]
            for line in result.stdout.split("Commands:")[1].splitlines()
            if line.startswith("  ") and line.split()
        ]
        assert listed == sorted(COMMANDS)
    assert "Keep a local SQLite mirror of the Channel Content API up to date." in result.stdout


def test_an_unknown_command_is_a_usage_error_and_resolves_to_none() -> None:
    result = CliRunner().invoke(main, ["backfil"])
    assert result.exit_code == 2
    assert "No such command 'backfil'. Did you mean 'backfill'?" in result.stderr
    assert main.get_command(click.Context(main), "backfil") is None


def test_every_table_entry_names_a_module_and_attribute() -> None:
    for name, where in COMMANDS.items():
        module, sep, attr = where.partition(":")
        assert (
            sep == ":"
            and module.startswith("sync.commands.")
            and attr.endswith(("_command", "_group"))
        ), (name, where)
