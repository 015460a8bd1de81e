"""The codebase stays lint-clean, formatted and mypy-strict, and the README stays honest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_lint_is_clean() -> None:
    r = _run(str(BIN / "ruff"), "check", "sync", "tests", "bench")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_is_clean() -> None:
    r = _run(str(BIN / "ruff"), "format", "--check", "sync", "tests", "bench")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_is_clean() -> None:
    r = _run(str(BIN / "mypy"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_test_command_is_what_ci_runs() -> None:
    """The README's test command line, in its first screen, is exactly the one .ci/run
    executes."""
    ci_line = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    readme = (ROOT / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:25])
    assert ci_line in first_screen
