"""The one-shot commands a user runs from the shell: webhooks, reconcile, status, and their errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sync.emulator import Emulator
from tests.support.processes import ROOT
from tests.support.processes import ccsync as sync
from tests.support.settings import cli_config as config

SECRET = "cli-secret-0123456789abcdef"


async def test_webhooks_subscribe_list_unsubscribe(emulator: Emulator, tmp_path: Path) -> None:
    cfg = str(config(tmp_path, emulator, secret=SECRET))
    rc, out, err = await sync("webhooks", "subscribe", "--config", cfg, emu=emulator)
    assert rc == 0, err
    topics = {w["attributes"]["topic"] for w in emulator.webhooks()}
    assert topics == {"malls", "deals", "articles"}
    assert all(
        w["attributes"]["callback_url"].endswith(f"/webhooks/{SECRET}") for w in emulator.webhooks()
    )
    rc, out, _ = await sync("webhooks", "list", "--config", cfg, emu=emulator)
    assert rc == 0 and out.split() == ["articles", "deals", "malls"]
    assert SECRET not in out
    rc, out, _ = await sync("webhooks", "unsubscribe", "--config", cfg, emu=emulator)
    assert rc == 0 and emulator.webhooks() == []


async def test_webhooks_without_a_secret_is_a_configuration_error(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = config(tmp_path, emulator)
    rc, _, err = await sync("run", "--config", str(cfg), emu=emulator)
    assert rc == 2 and f"{cfg}: webhooks: secret is required" in err and "Traceback" not in err


async def test_reconcile_and_status_commands(emulator: Emulator, tmp_path: Path) -> None:
    cfg = str(config(tmp_path, emulator))
    rc, _, err = await sync("backfill", "--quiet", "--config", cfg, emu=emulator)
    assert rc == 0, err
    emulator.delete("deals", emulator.ids("deals")[0])
    emulator.update("articles", emulator.ids("articles")[0], {"title": "changed"})
    rc, out, err = await sync("reconcile", "--config", cfg, emu=emulator)
    assert rc == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()}
    # The deletion comes from the deletions feed, applied before the listings.
    assert "removed       1" in lines["deletions"] and "fetched       1" in lines["articles"]
    assert "removed       0" in lines["deals"]
    rc, out, _ = await sync("status", "--config", cfg, emu=emulator)
    assert rc == 0 and "queue: 0 notices waiting" in out and "deals" in out


async def test_status_of_a_missing_mirror_is_a_clear_error(
    emulator: Emulator, tmp_path: Path
) -> None:
    rc, _, err = await sync("status", "--config", str(config(tmp_path, emulator)), emu=emulator)
    assert rc == 1 and "run `ccsync backfill` first" in err


def test_every_command_loads_lazily_under_its_name() -> None:
    """`ccsync backfill` imports only its own module; every listed command still resolves."""
    import subprocess

    import click

    from sync.cli import main
    from sync.commands import COMMANDS

    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
    probe = (
        "import sys; from sync.cli import main; "
        "main.get_command(None, 'backfill'); print('apscheduler' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"  # the daemon's scheduler is not loaded for a backfill


def _offline_config(tmp_path: Path, mirror: Path) -> Path:
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "http://127.0.0.1:1"\nemail = "a@b.c"\npassword = "pw"\n'
        f'[mirror]\npath = "{mirror}"\n'
    )
    return cfg


def test_config_before_the_command_and_a_directory_as_mirror(tmp_path: Path) -> None:
    import subprocess

    from sync.store import Mirror

    db = tmp_path / "m.db"
    Mirror.open(db).close()
    cfg = _offline_config(tmp_path, db)
    for args in (["--config", str(cfg), "status"], ["status", "--config", str(cfg)]):
        r = subprocess.run(
            [sys.executable, "-m", "sync", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert r.returncode == 0 and "mirror:" in r.stdout, r.stderr
    (tmp_path / "dir.db").mkdir()
    cfg = _offline_config(tmp_path, tmp_path / "dir.db")
    r = subprocess.run(
        [sys.executable, "-m", "sync", "status", "--config", str(cfg)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "is a directory" in r.stderr and "permissions" not in r.stderr


def test_status_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`ccsync status | head -1`: no traceback, no error line, 141 (128 + SIGPIPE) as coreutils."""
    import subprocess

    from sync.store import Mirror

    db = tmp_path / "m.db"
    Mirror.open(db).close()
    cfg = _offline_config(tmp_path, db)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as `head` is after a line
    try:
        r = subprocess.run(
            [sys.executable, "-m", "sync", "status", "--config", str(cfg)],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert r.returncode == 141 and r.stderr == "", (r.returncode, r.stderr)


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`--help` of every command explains each of its options (no bare `--resources`)."""
    import click

    from sync.cli import main

    ctx = click.Context(main)
    missing: list[str] = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, f"{path} {name}")
            return
        assert cmd.help, f"{path} has no help text"
        missing.extend(
            f"{path} {p.opts[0]}"
            for p in cmd.params
            if isinstance(p, click.Option) and not p.help and p.opts[0] != "--help"
        )

    walk(main, "sync")
    assert not missing, missing


def test_the_command_is_ccsync_everywhere_a_user_reads_it() -> None:
    """The console script does not shadow coreutils' `sync`; the README's first screen, the
    docs, the units and the demo's hint use it."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"ccsync": "sync.cli:main"}
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:25])
    assert ".venv/bin/ccsync demo" in first_screen
    for unit in ("sync.service", "sync-reconcile.service"):
        text = (ROOT / "systemd" / unit).read_text()
        assert "ExecStart=/opt/sync/.venv/bin/ccsync " in text
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bare = [
        f"{page.name}: {hit}"
        for page in docs
        for hit in re.findall(
            r"(?:`|\.venv/bin/)sync (?:backfill|status|run|reconcile|demo|emulator)\b",
            page.read_text(),
        )
    ]
    assert not bare, bare
    demo = (ROOT / "sync" / "daemon" / "demo.py").read_text()
    assert (
        "{program()} status --config" in demo
    )  # `.venv/bin/ccsync` as run (tests/e2e/test_demo.py)


def test_help_texts_point_at_the_page_that_holds_what_they_cite() -> None:
    """`ccsync emulator --help` cites the memory a resource takes and the hard readings: both
    are in docs/emulator.md, not the README (#40)."""
    from click.testing import CliRunner

    from sync.commands import emulator as emulator_cmd

    text = " ".join(
        CliRunner()
        .invoke(emulator_cmd.emulator_command, ["--help"], terminal_width=200)
        .output.split()
    )
    assert "README" not in text
    assert "~1.5 KB a resource, see docs/emulator.md" in text
    assert "see --hard and docs/emulator.md" in text
    page = (ROOT / "docs" / "emulator.md").read_text()
    assert "1,500 bytes a resource" in page and "--profile strict" in page
