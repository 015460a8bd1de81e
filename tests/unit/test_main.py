"""sync.__main__: `python -m sync` runs the same click group as the `ccsync` script."""

from __future__ import annotations

import runpy
import sys

import pytest

from sync import __version__
from sync.cli import main
from tests.support.processes import run


def test_the_module_runs_the_cli_group(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["python -m sync", "--version"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("sync", run_name="__main__")
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"ccsync, version {__version__}\n"


def test_importing_it_runs_nothing_and_holds_the_cli_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace = runpy.run_module("sync.__main__", run_name="not_main")
    assert namespace["main"] is main
    assert capsys.readouterr() == ("", "")


async def test_python_m_sync_exits_with_the_cli_s_code() -> None:
    code, out, err = await run("no-such-command", timeout=60)
    assert code == 2 and out == ""
    assert "No such command 'no-such-command'." in err
