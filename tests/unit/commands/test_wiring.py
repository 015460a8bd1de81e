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
from sync.core.target import MirrorTarget
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
    def read(config_path: Path | None, mirror_path: str | None, schema: str | None) -> None:
        target, settings = reader_from(config_path, mirror_path, schema)
        click.echo(f"{target.describe()} {settings is None}")

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


def test_a_reader_takes_a_postgresql_url_and_schema_and_never_shows_the_password(
    tmp_path: Path,
) -> None:
    seen: list[MirrorTarget] = []

    @click.command()
    @config_option
    @mirror_option
    def read(config_path: Path | None, mirror_path: str | None, schema: str | None) -> None:
        target, _ = reader_from(config_path, mirror_path, schema)
        seen.append(target)
        click.echo(click.get_current_context().find_root().meta["sync.mirror"])

    url = "postgresql://u:Hidden-pw-9@db:5432/m"
    alone = CliRunner().invoke(read, ["--mirror", url])
    assert seen[-1] == MirrorTarget(url=url, schema="ccsync")
    assert alone.stdout == "postgresql://u:***@db:5432/m (schema ccsync)\n"
    CliRunner().invoke(read, ["--mirror", url, "--schema", "tenant_a"])
    assert seen[-1].schema == "tenant_a"
    bad = CliRunner().invoke(read, ["--mirror", url, "--schema", "Tenant"])
    assert bad.exit_code == 2 and "plain lowercase schema name" in bad.output
    cfg = write_config(
        tmp_path / "c.toml",
        upstream={"base_url": "http://127.0.0.1:1", "email": "a@x", "password_env": "U_NEVER"},
        mirror={"url": url, "schema": "from_config"},
    )
    from_config = CliRunner().invoke(read, ["--config", str(cfg)])
    assert seen[-1] == MirrorTarget(url=url, schema="from_config"), from_config.output
    assert "Hidden-pw-9" not in from_config.output
    CliRunner().invoke(read, ["--config", str(cfg), "--mirror", str(tmp_path / "x.db")])
    assert seen[-1] == MirrorTarget(path=tmp_path / "x.db")
    CliRunner().invoke(read, ["--config", str(cfg), "--schema", "other"])
    assert seen[-1] == MirrorTarget(url=url, schema="other")
