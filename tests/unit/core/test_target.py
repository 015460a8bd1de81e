"""sync.core.target: `--mirror`'s value as a file or a PostgreSQL schema, never showing a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.core.target import SCHEMA_NAME, MirrorTarget, is_url, masked


def test_a_url_names_postgresql_and_anything_else_a_file() -> None:
    assert MirrorTarget.parse("postgresql://h/db", schema="s") == MirrorTarget(
        url="postgresql://h/db", schema="s"
    )
    assert MirrorTarget.parse(" POSTGRES://h/db").is_postgres
    assert MirrorTarget.parse("mirror.db") == MirrorTarget(path=Path("mirror.db"))
    assert MirrorTarget.parse(Path("postgresql:x")).path == Path("postgresql:x")
    assert not is_url("sqlite:///m.db")


def test_exactly_one_of_path_and_url() -> None:
    for bad in ({}, {"path": Path("m.db"), "url": "postgresql://h/db"}):
        with pytest.raises(ValueError, match="exactly one"):
            MirrorTarget(**bad)  # type: ignore[arg-type]


def test_the_password_is_masked_wherever_the_url_holds_it() -> None:
    url = "postgresql://u:pw-Secret@h:5432/db?sslmode=require&password=pw-Other"
    assert masked(url) == "postgresql://u:***@h:5432/db?sslmode=require&password=***"
    target = MirrorTarget.parse(url, schema="s")
    for text in (target.describe(), repr(target)):
        assert "pw-Secret" not in text and "pw-Other" not in text
    assert target.describe().endswith("(schema s)")
    assert masked("postgresql://u@h/db") == "postgresql://u@h/db"


def test_a_schema_name_is_a_plain_lowercase_identifier() -> None:
    assert SCHEMA_NAME.fullmatch("ccsync") and SCHEMA_NAME.fullmatch("_t2")
    for bad in ("Ccsync", "2t", "a-b", "a" * 64, ""):
        assert not SCHEMA_NAME.fullmatch(bad)
