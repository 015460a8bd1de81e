"""sync.commands.wiring: `fail_cleanly`'s line and exit code per error, `run_async`, and where settings come from."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sync.commands.wiring import (
    EXIT_STORAGE,
    config_option,
    fail_cleanly,
    mirror_option,
    reader_from,
    run_async,
    settings_from,
)
from sync.core.errors import (
    ConfigError,
    Interrupted,
    StorageFault,
    SyncError,
    UnreachableError,
)
from tests.support.settings import write_config

OFFLINE = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password": "pw"}


def _raising(exc: BaseException) -> click.Command:
    @click.command()
    @fail_cleanly
    def command() -> None:
        raise exc

    return command


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (ConfigError("bad key"), 2, "ccsync: configuration error: bad key"),
        (
            UnreachableError("no route", hint="check base_url"),
            3,
            "ccsync: error: no route (check base_url)",
        ),
        (
            StorageFault("disk_full", "/m.db", "full", "free space"),
            EXIT_STORAGE,
            "ccsync: /m.db: full; free space",
        ),
        (Interrupted(signal.SIGINT), 130, "ccsync: interrupted by SIGINT"),
        (Interrupted(signal.SIGTERM), 143, "ccsync: interrupted by SIGTERM"),
        (SyncError("something"), 1, "ccsync: error: something"),
        (KeyboardInterrupt(), 130, "ccsync: interrupted"),
        (
            sqlite3.OperationalError("database or disk is full"),
            EXIT_STORAGE,
            "ccsync: the mirror: database or disk is full",
        ),
    ],
)
def test_each_error_is_one_stderr_line_and_its_exit_code(
    exc: BaseException, code: int, line: str
) -> None:
    result = CliRunner().invoke(_raising(exc))
    assert result.exit_code == code
    assert result.stdout == ""
    assert result.stderr.startswith(line) and result.stderr.count("\n") == 1


def test_an_error_that_is_no_storage_fault_is_raised_as_is() -> None:
    result = CliRunner().invoke(_raising(sqlite3.ProgrammingError("bad binding")))
    assert isinstance(result.exception, sqlite3.ProgrammingError)
    assert result.exit_code == 1 and result.stderr == ""


def test_run_async_returns_the_result_and_leaves_no_sigterm_handler() -> None:
    async def answer() -> int:
        return 42

    assert run_async(answer()) == 42
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_settings_from_a_config_named_before_or_after_the_command(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "a.toml", upstream=OFFLINE, logging={"level": "error"})

    @click.group()
    @config_option
    def root(config_path: Path | None) -> None:
        pass

    @root.command()
    @config_option
    @fail_cleanly
    def show(config_path: Path | None) -> None:
        click.echo(settings_from(config_path).logging.level)

    assert CliRunner().invoke(root, ["--config", str(cfg), "show"]).stdout == "error\n"
    assert CliRunner().invoke(root, ["show", "--config", str(cfg)]).stdout == "error\n"
    missing = CliRunner().invoke(root, ["show", "--config", str(tmp_path / "nope.toml")])
    assert (
        missing.exit_code == 2 and "config file" in missing.stderr and "not found" in missing.stderr
    )


def test_a_reader_needs_no_config_with_mirror_and_never_a_secret(tmp_path: Path) -> None:
    @click.command()
    @config_option
    @mirror_option
    def read(config_path: Path | None, mirror_path: Path | None) -> None:
        path, settings = reader_from(config_path, mirror_path)
        click.echo(f"{path} {settings is None}")

    alone = CliRunner().invoke(read, ["--mirror", str(tmp_path / "x.db")])
    assert alone.stdout == f"{tmp_path / 'x.db'} True\n"
    # with a config whose password comes from an unset variable: not read, not refused
    cfg = write_config(
        tmp_path / "c.toml",
        upstream={"base_url": "http://127.0.0.1:1", "email": "a@x", "password_env": "U1_NEVER_SET"},
        mirror={"path": tmp_path / "m.db"},
    )
    from_config = CliRunner().invoke(read, ["--config", str(cfg)])
    assert from_config.stdout == f"{tmp_path / 'm.db'} False\n", from_config.output
    both = CliRunner().invoke(read, ["--config", str(cfg), "--mirror", str(tmp_path / "y.db")])
    assert both.stdout == f"{tmp_path / 'y.db'} False\n"
