"""sync.management.fields: the per-field verdicts on update bodies, and `load_update`'s file errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sync.core.errors import ConfigError
from sync.management.fields import article_problems, load_update, message_problems


def test_article_problems_by_field_read_only_first() -> None:
    problems = article_problems(
        {"id": 1, "archived_at": None, "tag_ids": [1, "2"], "colour": "red", "title": {"en": "T"}}
    )
    assert problems == {
        "id": ["is read-only"],
        "archived_at": ["is read-only"],
        "tag_ids": ["1: Input should be a valid integer"],
        "colour": ["not a writable field"],
    }
    assert article_problems({"status": "draft", "prototype_id": None}) == {}


def test_message_problems_name_the_nested_place() -> None:
    problems = message_problems(
        {"channels": [{"type": "sms"}, {"sender": {"from_name": None, "x": 1}}], "marketing": None}
    )
    assert problems == {
        "channels": [
            "1.sender.from_name: may not be null (not nullable in the spec); leave it out instead",
            "1.sender.x: not a writable field",
        ]
    }
    assert message_problems({"campaign_id": True}) == {
        "campaign_id": ["Input should be a valid integer"]
    }


def test_load_update_unwraps_its_kind_only(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"article": {"status": "draft"}}), encoding="utf-8")
    assert load_update(path, "article") == {"status": "draft"}
    path.write_text(json.dumps({"message": {"name": "x"}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"a\.json: message: not a writable field$"):
        load_update(path, "article")


def test_load_update_names_an_unreadable_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.json not found; pass the JSON file with --file$"):
        load_update(tmp_path / "nope.json", "message")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json is not a readable JSON file: Expecting"):
        load_update(bad, "message")
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="is not a readable JSON file"):
        load_update(bad, "article")
    bad.write_text('"text"', encoding="utf-8")
    with pytest.raises(ConfigError, match="must hold a JSON object with the message's fields"):
        load_update(bad, "message")
