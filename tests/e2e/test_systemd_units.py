"""The systemd units carry the directives docs/service.md promises, and `systemd-analyze verify` passes."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.units import UNITS, parse

SERVICES = (
    "sync.service",
    "sync-reconcile.service",
    "litestream.service",
    "litestream-follow.service",
    "ccsync@.service",
    "ccsync-reconcile@.service",
)
# systemd-analyze checks a template (`name@.service`) as one instance of it: its `%i` resolved.
INSTANCE = "demo"


def instance_name(unit: str, instance: str = INSTANCE) -> str:
    """The file name of `unit` as one instance: `ccsync@.service` -> `ccsync@demo.service`;
    a unit that is not a template keeps its name."""
    return unit.replace("@.", f"@{instance}.", 1)


def _checkable(unit: Path) -> str:
    """The unit's text for systemd-analyze: the real ExecStart lives in /opt/sync, so it points
    at a binary that exists (`verify` wants one)."""
    return unit.read_text().replace(
        "/opt/sync/.venv/bin/ccsync", shutil.which("true") or "/bin/true"
    )


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
    assert u["Service.ExecStart"][0].endswith("ccsync run --config /etc/sync/sync.toml")


def test_reconcile_unit_and_timer() -> None:
    svc, timer = parse("sync-reconcile.service"), parse("sync-reconcile.timer")
    assert svc["Service.Type"] == ["oneshot"] and "reconcile" in svc["Service.ExecStart"][0]
    assert svc["Service.ProtectSystem"] == ["strict"]
    assert timer["Timer.Persistent"] == ["true"] and timer["Timer.OnCalendar"] == ["daily"]


# The hardening of the single-tenant daemon: every tenant's instance must carry all of it.
HARDENING = (
    "NoNewPrivileges",
    "ProtectSystem",
    "ProtectHome",
    "PrivateTmp",
    "PrivateDevices",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectClock",
    "ProtectHostname",
    "RestrictAddressFamilies",
    "RestrictNamespaces",
    "RestrictRealtime",
    "RestrictSUIDSGID",
    "LockPersonality",
    "MemoryDenyWriteExecute",
    "SystemCallFilter",
    "SystemCallErrorNumber",
    "RemoveIPC",
    "PrivateMounts",
    "ProtectProc",
    "PrivateUsers",
    "SystemCallArchitectures",
    "CapabilityBoundingSet",
    "UMask",
)


@pytest.mark.parametrize(
    ("template", "single"),
    [("ccsync@.service", "sync.service"), ("ccsync-reconcile@.service", "sync-reconcile.service")],
)
def test_tenant_templates_give_each_instance_its_own_files(template: str, single: str) -> None:
    """docs/tenants.md: instance %i reads /etc/ccsync/%i.toml, keeps its mirror in its own state
    directory, gets its own credentials, runs as its own user, logs as its own identifier, and is
    hardened exactly like the single-tenant unit it mirrors."""
    u, s = parse(template), parse(single)
    command = "run" if template.startswith("ccsync@") else "reconcile"
    assert u["Service.ExecStart"] == [
        f"/opt/sync/.venv/bin/ccsync {command} --config /etc/ccsync/%i.toml"
    ]
    assert u["Service.StateDirectory"] == ["ccsync/%i"]
    assert u["Service.WorkingDirectory"] == ["/var/lib/ccsync/%i"]
    assert u["Service.StateDirectoryMode"] == ["0750"]
    assert u["Service.User"] == ["ccsync-%i"] and u["Service.Group"] == ["ccsync-%i"]
    assert "Service.DynamicUser" not in u
    assert u["Service.SyslogIdentifier"][0].endswith("-%i")
    assert sorted(u["Service.LoadCredential"]) == [
        "password:/etc/ccsync/%i/password",
        "webhook-secret:/etc/ccsync/%i/webhook-secret",
    ]
    assert u["Unit.AssertPathExists"] == ["/etc/ccsync/%i.toml"]
    for key in (*HARDENING, "Type", "WatchdogSec", "Restart", "SuccessExitStatus"):
        assert u.get(f"Service.{key}") == s.get(f"Service.{key}"), key
    if command == "reconcile":
        timer = parse("ccsync-reconcile@.timer")
        assert timer["Timer.OnCalendar"] == ["daily"] and timer["Timer.Persistent"] == ["true"]


@pytest.mark.parametrize(
    ("unit", "command"),
    [
        ("litestream.service", "replicate -config /etc/sync/litestream.yml"),
        (
            "litestream-follow.service",
            "restore -f -follow-interval 1s -config /etc/sync/litestream.yml "
            "/var/lib/sync/mirror.db",
        ),
    ],
)
def test_litestream_units_hand_their_credentials_to_litestream_alone(
    unit: str, command: str, tmp_path: Path
) -> None:
    """The shell in ExecStart (after systemd turns `$$` into `$`) reads both S3 keys from the
    unit's $CREDENTIALS_DIRECTORY into litestream's environment and execs it with the command
    line docs/scaling-out.md describes; a stub stands in for the binary and prints what it got."""
    u = parse(unit)
    names = sorted(spec.partition(":")[0] for spec in u["Service.LoadCredential"])
    assert names == ["litestream-access-key-id", "litestream-secret-access-key"]
    assert u["Service.User"] == ["sync"] and u["Service.ProtectSystem"] == ["strict"]
    exec_start = u["Service.ExecStart"][0]
    prefix = "/bin/sh -c '"
    assert exec_start.startswith(prefix) and exec_start.endswith("'"), exec_start
    script = exec_start[len(prefix) : -1].replace("$$", "$")
    stub = tmp_path / "litestream"
    stub.write_text(
        '#!/bin/sh\necho "$LITESTREAM_ACCESS_KEY_ID|$LITESTREAM_SECRET_ACCESS_KEY|$*"\n'
    )
    stub.chmod(0o755)
    creds = tmp_path / "credentials"
    creds.mkdir()
    for name in names:
        (creds / name).write_text(f"{name}-value\n")
    r = subprocess.run(
        ["/bin/sh", "-c", script.replace("/opt/sync/.venv/bin/litestream", str(stub))],
        env={"PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": str(creds)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"litestream-access-key-id-value|litestream-secret-access-key-value|{command}"
    )


def test_litestream_config_replicates_the_documented_mirror() -> None:
    """systemd/litestream.yml replicates the mirror the sync.toml of docs/service.md names,
    and docs/scaling-out.md's lines leave its checkpoints to Litestream."""
    import tomllib

    import yaml

    doc = yaml.safe_load((UNITS / "litestream.yml").read_text())
    mirror = tomllib.loads(_docs_toml())["mirror"]
    assert [db["path"] for db in doc["dbs"]] == [mirror["path"]]
    assert tomllib.loads(_docs_toml("scaling-out.md"))["mirror"]["checkpoints"] == "litestream"
    assert doc["dbs"][0]["replica"]["type"] == "s3"


def _docs_toml(page: str = "service.md") -> str:
    """The first `sync.toml` snippet of a docs page ("Running as a service", docs/service.md)."""
    text = (UNITS.parent / "docs" / page).read_text()
    start = text.index("```toml\n") + len("```toml\n")
    return text[start : text.index("```", start)]


@pytest.mark.parametrize(
    "unit",
    ["sync.service", "sync-reconcile.service", "ccsync@.service", "ccsync-reconcile@.service"],
)
def test_one_config_serves_both_units_through_their_credentials(
    unit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync.toml of docs/service.md names credentials, not one unit's directory: each unit that loads
    it finds every secret in its own $CREDENTIALS_DIRECTORY (systemd's per-unit directory)."""
    import tomllib

    from sync.core.config import parse_config

    creds = tmp_path / "run" / "credentials" / instance_name(unit)
    creds.mkdir(parents=True)
    for spec in parse(unit)["Service.LoadCredential"]:
        name, _, _source = spec.partition(":")
        (creds / name).write_text(f"{name}-value-0123456789abcdef\n")
    data = tomllib.loads(_docs_toml())
    data["upstream"].update(base_url="https://upstream.example", email="a@b.example")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    settings = parse_config(data)
    assert settings.upstream.secret_password() == "password-value-0123456789abcdef"
    assert settings.webhooks.secret is not None


def _units() -> list[Path]:
    return sorted(p for p in UNITS.iterdir() if p.suffix in (".service", ".timer"))


def test_units_parse_as_ini() -> None:
    for unit in _units():
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.read_string(unit.read_text())
        assert cp.sections()


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail(
            "systemd-analyze is missing: install it (apt-get install systemd) to check the units"
        )
    for unit in _units():
        # A template is verified as one instance (ccsync@demo.service), its `%i` resolved; the
        # template timer's instance then finds its service instance beside it.
        (tmp_path / instance_name(unit.name)).write_text(_checkable(unit))
    units = sorted(str(p) for p in tmp_path.iterdir())
    r = subprocess.run([analyze, "verify", *units], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr


def test_units_exposure_is_at_most_1_5(tmp_path: Path) -> None:
    """`systemd-analyze security` rates every service unit 1.5 or better (lower is safer); a
    template is rated as one instance of it."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: install it (apt-get install systemd)")
    for unit in SERVICES:
        name = instance_name(unit)
        (tmp_path / name).write_text(_checkable(UNITS / unit))
        r = subprocess.run(
            [analyze, "security", "--offline=true", str(tmp_path / name)],
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
        assert found, r.stdout + r.stderr
        assert float(found.group(1)) <= 1.5, f"{name}: exposure {found.group(1)}"


def test_alert_rules_are_valid_and_name_metrics_the_daemon_exports() -> None:
    """systemd/sync-alerts.yml: `promtool check rules` when promtool is installed; else parsed,
    every rule complete, and every sync_* metric it names one that /metrics exports."""
    import yaml

    from sync.core.metrics import Metrics

    rules_file = UNITS / "sync-alerts.yml"
    promtool = shutil.which("promtool")
    if promtool is not None:
        r = subprocess.run(
            [promtool, "check", "rules", str(rules_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    doc = yaml.safe_load(rules_file.read_text())
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    assert len(rules) >= 5
    for rule in rules:
        assert rule["alert"] and rule["expr"] and rule["annotations"]["summary"], rule

    class Live:
        def lag_seconds(self) -> dict[str, float]:
            return {"deals": 1.0}

        def rows(self) -> dict[str, int]:
            return {"deals": 1}

        def queue_depth(self) -> int:
            return 0

        def upstream_statuses(self) -> dict[int, int]:
            return {200: 1}

        def budget(self) -> dict[str, float]:
            return {"max_rate": 20.0, "rate": 10.0, "waiting": 0, "throttled": 1, "waited_s": 0.5}

    m = Metrics(Live())
    m.job_runs.labels(job="poll", outcome="ok").inc()
    m.notices.labels(outcome="accepted").inc()
    exported = {
        line.split()[2]
        for line in m.render()[0].decode().splitlines()
        if line.startswith("# TYPE ")
    }
    exported |= {f"{n}_{suffix}" for n in exported for suffix in ("total", "bucket")}
    for rule in rules:
        for name in re.findall(r"\b(sync_[a-z_]+|process_[a-z_]+)", rule["expr"]):
            assert name in exported, f"{rule['alert']}: {name} is not exported"
