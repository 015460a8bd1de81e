"""sync.commands.emulator: `ccsync emulator` refuses bad ranges, profiles and hard switches before serving."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sync.commands.emulator import emulator_command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--hard", "nosuch"],
            "Invalid value for --hard: unknown hard switch 'nosuch' (known: reuse_ids,",
        ),
        (
            ["--hard", "reuse_ids=maybe"],
            "Invalid value for --hard: reuse_ids takes true or false, not 'maybe'",
        ),
        (["--hard", "page_bound=x"], "Invalid value for --hard: page_bound takes an integer >= 0"),
        (["--profile", "lenient"], "Invalid value for '--profile': 'lenient' is not 'strict'."),
        (
            ["--resources", "49"],
            "Invalid value for '--resources': 49 is not in the range 50<=x<=5000000.",
        ),
        (
            ["--error-rate", "1.5"],
            "Invalid value for '--error-rate': 1.5 is not in the range 0<=x<=1.",
        ),
        (["--port", "70000"], "Invalid value for '--port': 70000 is not in the range 0<=x<=65535."),
    ],
)
def test_what_cannot_be_served_is_refused_with_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(emulator_command, ["--resources", "50", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert "emulator serving" not in result.stdout


def test_a_later_hard_switch_is_checked_after_the_earlier_ones() -> None:
    result = CliRunner().invoke(
        emulator_command, ["--resources", "50", "--hard", "reuse_ids", "--hard", "bogus=1"]
    )
    assert result.exit_code == 2 and "unknown hard switch 'bogus'" in result.stderr
