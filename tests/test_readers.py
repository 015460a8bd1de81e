"""Commands that only read the mirror need only the mirror (#33): `status`, `changes` and
`datasette-metadata` run from a shell under the service's configuration (secrets named as
systemd credentials, no $CREDENTIALS_DIRECTORY), and with `--mirror PATH` and no config file at
all; the commands that talk to the upstream still resolve, and still require, every secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sync.model import catalogue
from sync.store import Mirror
from tests.pages import write_page

ROOT = Path(__file__).resolve().parent.parent
READERS = [["status"], ["status", "--json"], ["changes"], ["datasette-metadata"]]


def _ccsync(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "sync", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    """A small mirror with one deal and one change feed entry."""
    db = tmp_path / "state" / "mirror.db"
    db.parent.mkdir()
    m = Mirror.open(db)
    deal = {
        "id": "1",
        "type": "deals",
        "attributes": {"title": "t", "updated_at": "2026-01-01T00:00:00.000Z"},
    }
    write_page(m, catalogue.TYPES["deals"], [deal])
    m.close()
    return db


def _service_config(tmp_path: Path, db: Path) -> Path:
    """The README's recommended service configuration: every secret a systemd credential."""
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "https://upstream.invalid"\nemail = "ops@example.com"\n'
        'password_credential = "password"\n'
        f'[mirror]\npath = "{db}"\n'
        '[webhooks]\nenabled = true\npublic_url = "https://mirror.example.com"\n'
        'secret_credential = "webhook-secret"\n'
    )
    return cfg


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_readers_run_under_the_service_config_without_its_secrets(
    tmp_path: Path, mirror: Path, args: list[str]
) -> None:
    cfg = _service_config(tmp_path, mirror)
    done = _ccsync([*args, "--config", str(cfg)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "CREDENTIALS_DIRECTORY" not in done.stderr


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_readers_need_no_config_file_with_mirror(
    tmp_path: Path, mirror: Path, args: list[str]
) -> None:
    empty = tmp_path / "nowhere"
    empty.mkdir()  # no sync.toml here
    done = _ccsync([*args, "--mirror", str(mirror)], empty)
    assert done.returncode == 0, done.stderr
    if args == ["status", "--json"]:
        assert json.loads(done.stdout)["mirror"] == str(mirror)
    if args == ["changes"]:
        assert done.stdout.split("\t")[1:4] == ["deals", "1", "upsert"]


def test_mirror_and_config_together_the_mirror_option_wins(tmp_path: Path, mirror: Path) -> None:
    cfg = _service_config(tmp_path, tmp_path / "elsewhere.db")
    done = _ccsync(["status", "--json", "--config", str(cfg), "--mirror", str(mirror)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mirror"] == str(mirror)


def test_a_missing_mirror_is_named_with_the_fix(tmp_path: Path) -> None:
    done = _ccsync(["status", "--mirror", str(tmp_path / "absent.db")], tmp_path)
    assert done.returncode == 1
    assert "absent.db" in done.stderr and "ccsync backfill" in done.stderr


def test_commands_that_reach_the_upstream_still_need_the_secrets(
    tmp_path: Path, mirror: Path
) -> None:
    cfg = _service_config(tmp_path, mirror)
    done = _ccsync(["backfill", "--config", str(cfg)], tmp_path)
    assert done.returncode == 2
    assert "password_credential" in done.stderr and "CREDENTIALS_DIRECTORY" in done.stderr


def test_readers_never_read_a_secret_file(tmp_path: Path, mirror: Path) -> Any:
    """A secret given as a file that this user cannot read is not even opened by a reader."""
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "https://upstream.invalid"\nemail = "ops@example.com"\n'
        f'password_file = "{tmp_path / "no-such-password"}"\n[mirror]\npath = "{mirror}"\n'
    )
    assert _ccsync(["status", "--config", str(cfg)], tmp_path).returncode == 0
    assert _ccsync(["backfill", "--config", str(cfg)], tmp_path).returncode == 2
