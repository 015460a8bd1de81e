"""sync.jobs.check: the summary `ccsync check` prints of a valid configuration names every part
and no secret, and the login asks each account once."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.core.config import parse_config
from sync.emulator import Emulator
from sync.jobs.check import log_in, summary
from tests.support.settings import settings_for


def test_the_summary_says_what_the_configuration_does_and_never_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHECK_PW", "hunter2-secret")
    settings = parse_config(
        {
            "upstream": {
                "base_url": "http://up.example",
                "email": "ops@example.com",
                "password_env": "CHECK_PW",
                "types": ["deals", "malls"],
            },
            "mirror": {"path": "/var/lib/sync/mirror.db"},
            "webhooks": {"enabled": False},
        }
    )
    line = summary(settings, Path("sync.toml"))
    assert line == (
        "sync.toml: upstream http://up.example, 1 account (password from $CHECK_PW); 2 types; "
        "mirror /var/lib/sync/mirror.db; webhooks off (polling only)"
    )
    assert "hunter2" not in line and "ops@example.com" not in line


def test_several_accounts_name_each_password_source(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("pw\n")
    settings = parse_config(
        {
            "upstream": {
                "base_url": "http://up.example",
                "accounts": [
                    {"email": "a@x", "password": "inline-pw"},
                    {"email": "b@x", "password_file": str(tmp_path / "pw")},
                ],
            },
            "webhooks": {"secret": "0123456789abcdef0"},
        }
    )
    line = summary(settings, Path("s.toml"))
    assert f"2 accounts (password from inline, file {tmp_path / 'pw'}); 13 types (all)" in line
    assert "webhooks on 127.0.0.1:8787" in line and "inline-pw" not in line


async def test_log_in_asks_each_account_once(emulator: Emulator, tmp_path: Path) -> None:
    assert await log_in(settings_for(emulator, tmp_path / "m.db")) == 1
    assert not (tmp_path / "m.db").exists()  # no mirror opened
