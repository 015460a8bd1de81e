"""The systemd units carry the directives the README promises, and `systemd-analyze verify` passes."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent / "systemd"


def parse(name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.setdefault(f"{section}.{key}", []).append(value)
    return out


def test_daemon_unit_directives() -> None:
    u = parse("sync.service")
    expect = {
        "Service.Type": "notify",
        "Service.Restart": "on-failure",
        "Service.User": "sync",
        "Service.StateDirectory": "sync",
        "Service.ProtectSystem": "strict",
        "Service.NoNewPrivileges": "yes",
        "Service.PrivateTmp": "yes",
        "Service.WatchdogSec": "60",
    }
    for key, value in expect.items():
        assert u[key] == [value], key
    assert "password:/etc/sync/password" in u["Service.LoadCredential"]
    assert u["Service.ExecStart"][0].endswith("sync run --config /etc/sync/sync.toml")


def test_reconcile_unit_and_timer() -> None:
    svc, timer = parse("sync-reconcile.service"), parse("sync-reconcile.timer")
    assert svc["Service.Type"] == ["oneshot"] and "reconcile" in svc["Service.ExecStart"][0]
    assert svc["Service.ProtectSystem"] == ["strict"]
    assert timer["Timer.Persistent"] == ["true"] and timer["Timer.OnCalendar"] == ["daily"]


def test_units_parse_as_ini() -> None:
    for unit in UNITS.iterdir():
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.read_string(unit.read_text())
        assert cp.sections()


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail(
            "systemd-analyze is missing: install it (apt-get install systemd) to check the units"
        )
    for unit in UNITS.iterdir():
        # The real ExecStart lives in /opt/sync; verify a copy pointing at a binary that exists.
        text = unit.read_text().replace(
            "/opt/sync/.venv/bin/sync", shutil.which("true") or "/bin/true"
        )
        (tmp_path / unit.name).write_text(text)
    units = sorted(str(p) for p in tmp_path.iterdir())
    r = subprocess.run([analyze, "verify", *units], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
