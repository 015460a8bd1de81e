"""sync.commands.management: the update commands' argument and configuration errors, and `_show`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sync.cli import main
from sync.commands.management import _show
from tests.support.settings import write_config

OFFLINE = {"base_url": "http://127.0.0.1:1", "email": "a@x", "password": "pw"}
#: The management API at a port nothing listens on: a command that sent anything would fail
#: otherwise (exit 3), so exit 2 shows that nothing was sent.
MANAGEMENT = {"base_url": "http://127.0.0.1:1", "product": "p", "loyalty_club": "c"}


def _files(tmp_path: Path, body: Any, **management: str) -> tuple[Path, Path]:
    sections: dict[str, Any] = {"upstream": OFFLINE}
    if management:
        sections["management"] = {**MANAGEMENT, **management}
    cfg = write_config(tmp_path / "sync.toml", **sections)
    doc = tmp_path / "update.json"
    doc.write_text(json.dumps(body), encoding="utf-8")
    return cfg, doc


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["articles", "update", "0", "--file", "x.json"],
            "'ARTICLE_ID': 0 is not in the range x>=1.",
        ),
        (["articles", "update", "3"], "Missing option '--file'."),
        (
            ["messages", "update", "news", "x", "--file", "f"],
            "'MESSAGE_ID': 'x' is not a valid integer",
        ),
        (
            ["messages", "update", "news", "1", "--file", "f", "--archived", "maybe"],
            "'maybe' is not one of 'true', 'false'.",
        ),
    ],
)
def test_argument_errors_exit_2(args: list[str], message: str) -> None:
    result = _invoke(*args)
    assert result.exit_code == 2 and message in result.stderr


def test_without_a_management_section_the_fix_is_named(tmp_path: Path) -> None:
    cfg, doc = _files(tmp_path, {"status": "draft"})
    result = _invoke("articles", "update", "3", "--file", str(doc), "--config", str(cfg))
    assert result.exit_code == 2
    assert result.stderr == (
        "ccsync: configuration error: [management] is not configured; add the section "
        "(see config.example.toml)\n"
    )


def test_a_read_only_field_is_refused_before_sending(tmp_path: Path) -> None:
    cfg, doc = _files(tmp_path, {"article": {"url": "/x", "status": "draft"}}, client_token="ct-u1")
    result = _invoke("articles", "update", "3", "--file", str(doc), "--config", str(cfg))
    assert result.exit_code == 2
    assert (
        f"{doc}: url is read-only (produced by the service); remove them from the file"
        in result.stderr
    )


def test_a_message_update_needs_the_user_token_before_its_file_is_read(tmp_path: Path) -> None:
    cfg, _ = _files(tmp_path, {}, client_token="ct-u1")
    missing = tmp_path / "absent.json"
    result = _invoke(
        "messages", "update", "news", "1", "--file", str(missing), "--config", str(cfg)
    )
    assert result.exit_code == 2
    assert "bearer_token is required for the message update" in result.stderr


def test_show_prints_scalars_as_they_are_and_the_rest_as_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _show({"id": 3, "title": {"en": "T"}, "archived_at": None, "tag_ids": [1, 2]}, as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        "id                     3",
        'title                  {"en": "T"}',
        "archived_at            None",
        "tag_ids                [1, 2]",
    ]
    _show({"b": 1, "a": [True]}, as_json=True)
    assert capsys.readouterr().out == '{\n  "a": [\n    true\n  ],\n  "b": 1\n}\n'
