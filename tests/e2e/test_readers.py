"""Commands that only read the mirror need only the mirror (#33): `status`, `changes` and
`datasette-metadata` run from a shell under the service's configuration (secrets named as
systemd credentials, no $CREDENTIALS_DIRECTORY), and with `--mirror PATH` and no config file at
all; the commands that talk to the upstream still resolve, and still require, every secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sync.model import catalogue
from sync.store import Mirror
from tests.support.pages import write_page
from tests.support.processes import run

READERS = [["status"], ["status", "--json"], ["changes"], ["datasette-metadata"]]


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell, not a unit: no $CREDENTIALS_DIRECTORY."""
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


@pytest.fixture
def mirror_path(tmp_path: Path) -> Path:
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
async def test_readers_run_under_the_service_config_without_its_secrets(
    tmp_path: Path, mirror_path: Path, args: list[str]
) -> None:
    cfg = _service_config(tmp_path, mirror_path)
    code, out, err = await run(*args, "--config", str(cfg))
    assert code == 0, err
    assert "CREDENTIALS_DIRECTORY" not in err


@pytest.mark.parametrize("args", READERS, ids=" ".join)
async def test_readers_need_no_config_file_with_mirror(
    tmp_path: Path, mirror_path: Path, args: list[str]
) -> None:
    code, out, err = await run(*args, "--mirror", str(mirror_path))
    assert code == 0, err
    if args == ["status", "--json"]:
        assert json.loads(out)["mirror"] == str(mirror_path)
    if args == ["changes"]:
        assert out.split("\t")[1:4] == ["deals", "1", "upsert"]


async def test_mirror_and_config_together_the_mirror_option_wins(
    tmp_path: Path, mirror_path: Path
) -> None:
    cfg = _service_config(tmp_path, tmp_path / "elsewhere.db")
    code, out, err = await run(
        "status", "--json", "--config", str(cfg), "--mirror", str(mirror_path)
    )
    assert code == 0, err
    assert json.loads(out)["mirror"] == str(mirror_path)


async def test_a_missing_mirror_is_named_with_the_fix(tmp_path: Path) -> None:
    code, out, err = await run("status", "--mirror", str(tmp_path / "absent.db"))
    assert code == 1
    assert "absent.db" in err and "ccsync backfill" in err


async def test_commands_that_reach_the_upstream_still_need_the_secrets(
    tmp_path: Path, mirror_path: Path
) -> None:
    cfg = _service_config(tmp_path, mirror_path)
    code, out, err = await run("backfill", "--config", str(cfg))
    assert code == 2
    assert "password_credential" in err and "CREDENTIALS_DIRECTORY" in err


async def test_readers_never_read_a_secret_file(tmp_path: Path, mirror_path: Path) -> None:
    """A secret given as a file that this user cannot read is not even opened by a reader."""
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "https://upstream.invalid"\nemail = "ops@example.com"\n'
        f'password_file = "{tmp_path / "no-such-password"}"\n[mirror]\npath = "{mirror_path}"\n'
    )
    assert (await run("status", "--config", str(cfg)))[0] == 0
    assert (await run("backfill", "--config", str(cfg)))[0] == 2
