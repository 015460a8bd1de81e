"""`ccsync check` as a user runs it: a configuration checked offline, then with one login
upstream; the exit codes of docs/commands.md; mistyped keys and commands named."""

from __future__ import annotations

from pathlib import Path

from sync.emulator import Emulator
from tests.support.processes import CLI_PASSWORD_ENV, run
from tests.support.processes import ccsync as sync
from tests.support.settings import cli_config, upstream_keys, write_config

SECRET = "check-secret-0123456789abcdef"


async def test_check_offline_then_with_one_login(emulator: Emulator, tmp_path: Path) -> None:
    cfg = str(cli_config(tmp_path, emulator, secret=SECRET))
    rc, out, err = await sync("check", "--config", cfg, emu=emulator)
    assert rc == 0, err
    assert out.startswith(f"ok: {cfg}: upstream {emulator.base_url}, 1 account")
    rc, out, err = await sync("check", "--upstream", "--config", cfg, emu=emulator)
    assert rc == 0, err
    assert out.rstrip().endswith("; upstream login ok (1 of 1)")
    assert not (tmp_path / "m.db").exists()  # nothing opened


async def test_check_exit_codes(emulator: Emulator, tmp_path: Path) -> None:
    cfg = str(cli_config(tmp_path, emulator, secret=SECRET))
    rc, _, err = await run("check", "--config", cfg, env={CLI_PASSWORD_ENV: ""})
    assert rc == 2 and "$CLI_PW, which is set but empty" in err
    rc, _, err = await run("check", "--upstream", "--config", cfg, env={CLI_PASSWORD_ENV: "wrong"})
    assert rc == 1 and "login refused" in err and "wrong" not in err
    gone = write_config(
        tmp_path / "gone.toml",
        upstream={**upstream_keys(emulator, CLI_PASSWORD_ENV), "base_url": "http://127.0.0.1:1"},
        webhooks={"enabled": False},
    )
    rc, _, err = await sync("check", "--upstream", "--config", str(gone), emu=emulator)
    assert rc == 3 and "check [upstream] base_url" in err
    assert len(err.strip().splitlines()) == 1


async def test_a_mistyped_key_and_command_name_the_closest(
    emulator: Emulator, tmp_path: Path
) -> None:
    typo = write_config(
        tmp_path / "typo.toml",
        upstream=upstream_keys(emulator, CLI_PASSWORD_ENV),
        mirror={"pth": "m.db"},
    )
    rc, _, err = await sync("check", "--config", str(typo), emu=emulator)
    assert rc == 2
    assert "unknown key mirror.pth; did you mean path?" in err
    rc, _, err = await sync("chek", emu=emulator)
    assert rc == 2 and "No such command 'chek'. Did you mean 'check'?" in err
