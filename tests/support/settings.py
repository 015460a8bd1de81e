"""Settings and config files pointed at an emulator: how every suite tells sync where to read.

`settings_for` builds the in-process `Settings` (the password given as is); `write_config`
writes a `sync.toml` for a `ccsync` subprocess (which reads its password from the environment).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sync.core.config import Settings, parse_config
from sync.emulator import Emulator

#: The webhook secret of the daemon suites (long enough for the config's minimum).
SECRET = "test-secret-0123456789abcdef"
#: What the daemon suites mirror: few types, so a daemon is ready within seconds.
DAEMON_TYPES = ["malls", "deals", "articles", "stores"]


def settings_for(
    emu: Emulator,
    db: Path,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
    **upstream: Any,
) -> Settings:
    """Settings reading `emu` into `db`; `upstream` adds or overrides `[upstream]` keys,
    `sections` adds tables (`{"schedule": {...}}`), merged into `[mirror]` if it names it."""
    config: dict[str, dict[str, Any]] = {
        "upstream": {
            "base_url": emu.base_url,
            "email": emu.email,
            "password": emu.password,
            **upstream,
        },
        "mirror": {"path": str(db)},
    }
    for name, keys in (sections or {}).items():
        config[name] = {**config.get(name, {}), **keys}
    return parse_config(config)


def make_settings(
    emu: Emulator, db: Path, *, parse_workers: int | None = None, **upstream: Any
) -> Settings:
    """The backfill suites' settings: 4 connections, short backoffs, a 30 s retry budget."""
    up: dict[str, Any] = {
        "concurrency": 4,
        "retry_budget": 30.0,
        "max_backoff": 0.05,
        "timeout": 10.0,
        **upstream,
    }
    sections = {"backfill": {"parse_workers": parse_workers}} if parse_workers is not None else {}
    return settings_for(emu, db, sections, **up)


def daemon_settings(
    emu: Emulator,
    db: Path,
    *,
    webhooks: bool,
    upstream: Mapping[str, Any] | None = None,
    **schedule: Any,
) -> Settings:
    """The daemon suites' settings: `DAEMON_TYPES`, every job an hour apart unless `schedule`
    says otherwise (a test drives the one it tests), webhooks on a port of the OS's choosing;
    `upstream` adds or overrides `[upstream]` keys."""
    sched = {
        "poll_interval": 3600.0,
        "deletions_interval": 3600.0,
        "hours_interval": 3600.0,
        "subscriptions_interval": 3600.0,
        "poll_overlap": 2.0,
        "queue_batch_delay": 0.01,
        **schedule,
    }
    return settings_for(
        emu,
        db,
        {
            "webhooks": {"enabled": webhooks, "listen": "127.0.0.1:0", "secret": SECRET},
            "schedule": sched,
            "logging": {"level": "warning", "format": "json"},
        },
        **{"types": DAEMON_TYPES, "max_backoff": 0.05, "retry_budget": 20.0, **(upstream or {})},
    )


def upstream_keys(emu: Emulator, password_env: str, **keys: Any) -> dict[str, Any]:
    """A config file's `[upstream]` for `emu`, the password read from `$password_env` (a file
    never holds it); `keys` adds or overrides keys."""
    return {"base_url": emu.base_url, "email": emu.email, "password_env": password_env, **keys}


def toml_value(value: Any) -> str:
    """`value` (text, number, boolean, path or list of them) as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def write_config(path: Path, **sections: Mapping[str, Any]) -> Path:
    """Write `sections` (`upstream={...}, mirror={...}`) to `path` as a TOML config file."""
    lines: list[str] = []
    for name, keys in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_config(tmp_path: Path, emu: Emulator, **webhooks: str) -> Path:
    """The CLI suites' `sync.toml`: malls, deals and articles of `emu` into `tmp_path/m.db`,
    the password from `$CLI_PW`; `webhooks` adds `[webhooks]` keys."""
    return write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(
            emu, "CLI_PW", types=["malls", "deals", "articles"], max_backoff=0.05
        ),
        mirror={"path": tmp_path / "m.db"},
        webhooks={"listen": "127.0.0.1:8999", **webhooks},
        logging={"level": "warning", "format": "json"},
    )
