"""sync.commands.mirror: `changes`' argument errors, and the readers on a mirror given by --mirror alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sync.cli import main
from sync.store import Mirror


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    Mirror.open(path).close()
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--type", "deals", "--type", "zebras"],
            "Invalid value for --type: unknown type(s) zebras; choose from malls,",
        ),
        (["--since", "-1"], "Invalid value for '--since': -1 is not in the range x>=0."),
        (
            ["--interval", "0.01"],
            "Invalid value for '--interval': 0.01 is not in the range x>=0.05.",
        ),
    ],
)
def test_changes_refuses_bad_arguments_before_reading(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["changes", "--mirror", str(tmp_path / "none.db"), *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_changes_of_an_empty_mirror_prints_nothing(empty: Path) -> None:
    result = CliRunner().invoke(main, ["changes", "--mirror", str(empty), "--type", "deals"])
    assert (result.exit_code, result.stdout) == (0, "")


def test_status_json_of_an_empty_mirror_needs_no_config(empty: Path) -> None:
    result = CliRunner().invoke(main, ["status", "--mirror", str(empty), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict) and str(empty) in json.dumps(data)


def test_datasette_metadata_is_json_for_the_mirror(empty: Path) -> None:
    result = CliRunner().invoke(main, ["datasette-metadata", "--mirror", str(empty)])
    assert result.exit_code == 0, result.output
    assert "databases" in json.loads(result.stdout)


def test_backfill_without_a_config_file_names_the_fix(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["backfill", "--config", str(tmp_path / "sync.toml")])
    assert result.exit_code == 2
    assert result.stderr == (
        f"ccsync: configuration error: config file {tmp_path / 'sync.toml'} not found; copy "
        f"config.example.toml to {tmp_path / 'sync.toml'} or pass --config\n"
    )
