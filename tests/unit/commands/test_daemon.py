"""sync.commands.daemon: `run`, `reconcile`, `webhooks` and `demo` refuse what they cannot start with."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sync.cli import main
from tests.support.settings import write_config

OFFLINE = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password": "pw"}
SECRET = "u1-daemon-secret-0123456789"


def test_run_with_a_client_token_alone_stops_before_the_daemon_starts(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "sync.toml",
        upstream=OFFLINE,
        mirror={"path": tmp_path / "m.db"},
        webhooks={"secret": SECRET},
        management={
            "base_url": "http://127.0.0.1:1",
            "product": "p",
            "loyalty_club": "c",
            "client_token": "client-token-u1",
        },
    )
    result = CliRunner().invoke(main, ["run", "--config", str(cfg)])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "ccsync: configuration error: [management] bearer_token is required for the press "
        "release list the daemon mirrors"
    )
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("command", [["run"], ["webhooks", "list"], ["webhooks", "subscribe"]])
def test_the_receivers_commands_need_the_webhook_secret(tmp_path: Path, command: list[str]) -> None:
    cfg = write_config(tmp_path / "sync.toml", upstream=OFFLINE, webhooks={"enabled": True})
    result = CliRunner().invoke(main, [*command, "--config", str(cfg)])
    assert result.exit_code == 2
    assert "webhooks: secret is required when webhooks are enabled" in result.stderr


def test_webhooks_lists_its_three_actions() -> None:
    result = CliRunner().invoke(main, ["webhooks", "--help"])
    assert result.exit_code == 0
    actions = [
        line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert actions == ["list", "subscribe", "unsubscribe"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resources", "99"], "'--resources': 99 is not in the range 100<=x<=2000000."),
        (
            ["--mutations-per-second", "0"],
            "'--mutations-per-second': 0.0 is not in the range 0.1<=x<=1000.",
        ),
        (["--duration", "0.5"], "'--duration': 0.5 is not in the range x>=1."),
    ],
)
def test_demo_refuses_sizes_out_of_range(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--dir", str(tmp_path / "demo"), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "demo").exists()


def test_reconcile_takes_no_argument(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["reconcile", "deals"])
    assert result.exit_code == 2 and "Got unexpected extra argument (deals)" in result.stderr
