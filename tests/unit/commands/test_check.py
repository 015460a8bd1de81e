"""sync.commands.check: `ccsync check` prints `ok: <summary>` or the one configuration line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sync.commands.check import check_command
from tests.support.settings import write_config

UPSTREAM = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password_env": "CHECK_CMD_PW"}


def test_a_valid_configuration_is_ok_without_asking_the_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Port 1 answers nobody: the check never asks it without --upstream."""
    monkeypatch.setenv("CHECK_CMD_PW", "pw")
    cfg = write_config(tmp_path / "sync.toml", upstream=UPSTREAM, webhooks={"enabled": False})
    result = CliRunner().invoke(check_command, ["--config", str(cfg)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok: {cfg}: upstream http://127.0.0.1:1, 1 account")


def test_the_webhook_secret_ccsync_run_needs_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECK_CMD_PW", "pw")
    cfg = write_config(tmp_path / "sync.toml", upstream=UPSTREAM)
    result = CliRunner().invoke(check_command, ["--config", str(cfg)])
    assert result.exit_code == 2
    assert result.stderr.startswith("ccsync: configuration error: ")
    assert "webhooks: secret is required" in result.stderr


def test_an_empty_password_variable_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECK_CMD_PW", "")
    cfg = write_config(tmp_path / "sync.toml", upstream=UPSTREAM, webhooks={"enabled": False})
    result = CliRunner().invoke(check_command, ["--config", str(cfg)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"ccsync: configuration error: {cfg}: upstream: password_env names $CHECK_CMD_PW, "
        "which is set but empty; export the password in it\n"
    )
