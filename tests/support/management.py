"""The management suites' set-up: a config with a `[management]` table pointed at the
emulator, `ccsync` runs with its bearer token, and update bodies written to files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sync.emulator import Emulator
from tests.support.processes import run
from tests.support.settings import write_config


def management_config(
    tmp_path: Path, emu: Emulator, name: str = "sync.toml", **management: Any
) -> str:
    """A config file for `emu`'s loyalty club `demo-club`; `management` adds
    `[management]` keys (the token the file names, `locales`, ...)."""
    return str(
        write_config(
            tmp_path / name,
            upstream={"base_url": emu.base_url, "email": emu.email, "password": emu.password},
            mirror={"path": tmp_path / "m.db"},
            management={
                "base_url": emu.base_url,
                "product": "loyalty",
                "loyalty_club": "demo-club",
                **management,
            },
        )
    )


async def ccsync(emu: Emulator, *args: str) -> tuple[int, str, str]:
    """Run `ccsync <args>` with `emu`'s management bearer token in `$T_MGMT`."""
    return await run(*args, env={"T_MGMT": emu.management.token}, timeout=60)


def write(tmp_path: Path, name: str, body: Any) -> Path:
    """`body` as a JSON file `name` (an update's `--file`)."""
    p = tmp_path / name
    p.write_text(json.dumps(body))
    return p
