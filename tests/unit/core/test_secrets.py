"""sync.core.secrets: which secrets a validation resolves, and each source's rules and messages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import SecretStr, ValidationInfo

from sync.core.redact import redact_text
from sync.core.secrets import (
    find_secret,
    needed,
    read_secret,
    resolving,
    resolving_webhook,
    sources,
)


@dataclass
class _Info:
    """Just what `needed` reads of pydantic's `ValidationInfo`."""

    context: dict[str, Any] | None


def _info(context: dict[str, Any] | None) -> ValidationInfo:
    return cast(ValidationInfo, _Info(context))


def test_what_each_context_resolves() -> None:
    assert needed(_info(None)) == "all"
    assert needed(_info({"secrets": True})) == "all"
    assert needed(_info({"secrets": False})) == "none"
    assert needed(_info({"secrets": "receiver"})) == "receiver"
    assert not resolving(_info({"secrets": "none"}))
    assert resolving(_info({"secrets": "upstream"}))
    assert not resolving_webhook(_info({"secrets": "upstream"}))
    assert resolving_webhook(_info({"secrets": "receiver"}))


def test_more_than_one_source_is_refused_naming_them() -> None:
    assert sources(None, "PW", None, "password", None) == ["password_env"]
    assert sources(None, None, None, "password", None) == []
    with pytest.raises(ValueError, match=r"^give only one of token, token_file, token_credential$"):
        sources(SecretStr("x"), None, Path("f"), "token", "cred")


def test_each_source_that_cannot_be_read_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    monkeypatch.delenv("U1_UNSET_VAR", raising=False)
    with pytest.raises(ValueError, match=r"secret_credential is a credential name, not a path"):
        find_secret(None, None, None, "secret", "../x")
    with pytest.raises(ValueError, match=r"needs \$CREDENTIALS_DIRECTORY, which is not set"):
        find_secret(None, None, None, "secret", "pw")
    with pytest.raises(ValueError, match=r"^secret_env names \$U1_UNSET_VAR, which is not set"):
        find_secret(None, "U1_UNSET_VAR", None, "secret", None)
    missing = tmp_path / "nope"
    with pytest.raises(ValueError, match=r"secret_file '.*nope' cannot be read: No such file"):
        find_secret(None, None, missing, "secret", None)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    with pytest.raises(ValueError, match=r"is LoadCredential=pw:<file> in the unit\?"):
        find_secret(None, None, None, "secret", "pw")


def test_an_empty_source_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SYNC_PASSWORD=` (set, empty) is a configuration error, not a login refused later."""
    monkeypatch.setenv("U1_EMPTY_VAR", "")
    with pytest.raises(ValueError, match=r"^password_env names \$U1_EMPTY_VAR, which is set but "):
        find_secret(None, "U1_EMPTY_VAR", None, "password", None)
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"password_file '.*empty' is empty; write the password"):
        find_secret(None, None, tmp_path / "empty", "password", None)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    with pytest.raises(ValueError, match=r"password_credential 'empty' is empty in "):
        find_secret(None, None, None, "password", "empty")


def test_a_file_or_credential_is_read_stripped_and_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pw").write_text("  cred-value-u1-4471\n", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    secret = read_secret(None, None, None, "password", "pw")
    assert secret is not None and secret.get_secret_value() == "cred-value-u1-4471"
    assert redact_text("said cred-value-u1-4471") == "said ***"


def test_without_resolving_only_the_shape_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("U1_UNSET_VAR", raising=False)
    assert read_secret(None, "U1_UNSET_VAR", None, "password", resolve=False) is None
    with pytest.raises(ValueError, match="give only one of"):
        read_secret(SecretStr("a"), "U1_UNSET_VAR", None, "password", resolve=False)
