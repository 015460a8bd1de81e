"""The configuration file: config.example.toml matches the models, and bad input is one clear line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sync.core.config import Settings, load_config, parse_config
from sync.core.errors import ConfigError
from tests.support.paths import ROOT

EXAMPLE = ROOT / "config.example.toml"


def _keys_in_example() -> dict[str, set[str]]:
    """Every key of the example, commented-out alternatives included (`# key = ...`)."""
    sections: dict[str, set[str]] = {}
    current = ""
    for line in EXAMPLE.read_text().splitlines():
        if m := re.match(r"^(?:# )?\[(\w+)\]$", line):
            current = m.group(1)
            sections[current] = set()
        elif m := re.match(r"^#?\s?(\w+) = ", line):
            sections[current].add(m.group(1))
    return sections


def _model_keys() -> dict[str, set[str]]:
    return {name: set(_fields(_section_model(name))) for name in Settings.model_fields}


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by the key the file spells (`[mirror] schema` is the field `schema_`:
    pydantic's `BaseModel.schema` takes the name)."""
    return {f.alias or name: f for name, f in model.model_fields.items()}


def _section_model(name: str) -> type[BaseModel]:
    """The model of one section (optional sections are `Model | None`)."""
    annotation = Settings.model_fields[name].annotation
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise AssertionError(name)


def test_example_documents_every_setting_and_nothing_else() -> None:
    """A key added to the models but not the example (or the reverse) fails here."""
    assert _keys_in_example() == _model_keys()


def test_every_setting_has_a_description() -> None:
    for name in Settings.model_fields:
        for key, sub in _fields(_section_model(name)).items():
            assert sub.description, f"[{name}] {key} has no description"


def test_example_loads_with_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNC_PASSWORD", "pw-from-env")
    settings = load_config(EXAMPLE)
    assert settings.upstream.secret_password() == "pw-from-env"
    defaults: dict[str, Any] = tomllib.loads(EXAMPLE.read_text())
    for section, values in defaults.items():
        for key, value in values.items():
            field = _fields(_section_model(section))[key]
            if field.is_required() or key.endswith("_env"):
                continue
            default = field.get_default(call_default_factory=True)
            if key == "email" and default is None:  # the single account's: a value to fill in
                continue
            assert value == (str(default) if isinstance(default, Path) else default), (
                f"[{section}] {key}: example says {value!r}, model default is {default!r}"
            )


def _base(**upstream: Any) -> dict[str, Any]:
    up = {"base_url": "http://127.0.0.1:1", "email": "a@b.c", "password": "pw"}
    up.update(upstream)
    return {"upstream": {k: v for k, v in up.items() if v is not None}}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (_base(base_url="ftp://x"), "upstream.base_url: must start with http:// or https://"),
        (_base(base_url=None), "[upstream] base_url is required"),
        (
            _base(password=None),
            "set one of password, password_env, password_file or password_credential",
        ),
        (_base(password_env="NOPE_NOT_SET_123"), "give only one of password, password_env"),
        (_base(page_size=500), "upstream.page_size"),
        (_base(types=["deals", "spaceships"]), "unknown type(s) spaceships"),
        ({**_base(), "mirror": {"pth": "x"}}, "unknown key mirror.pth; did you mean path?"),
        ({**_base(), "mirorr": {}}, "unknown key mirorr; did you mean mirror?"),
        (_base(pasword_env="X"), "unknown key upstream.pasword_env; did you mean password_env?"),
        (
            _base(email=None, password=None, accounts=[{"email": "a", "pasword": "p"}]),
            "unknown key upstream.accounts.0.pasword; did you mean password?",
        ),
        ({**_base(), "mirror": {"zzzz": 1}}, "unknown key mirror.zzzz; remove it or check"),
        (
            {**_base(), "mirror": {"checkpoints": "truncate"}},
            'mirror.checkpoints: must be "sqlite" (sync checkpoints the WAL itself) or '
            '"litestream"',
        ),
        ({**_base(), "webhooks": {"listen": "nope"}}, "must be host:port"),
        ({**_base(), "webhooks": {"secret": "short"}}, "at least 16 characters"),
        ({}, "section [upstream] is required"),
    ],
)
def test_bad_settings_name_the_key_and_the_fix(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, Path("sync.toml"))
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_password_from_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PW", "from-env")
    s = parse_config(_base(password=None, password_env="MY_PW"))
    assert s.upstream.secret_password() == "from-env"
    f = tmp_path / "pw"
    f.write_text("from-file\n")
    s = parse_config(_base(password=None, password_file=str(f)))
    assert s.upstream.secret_password() == "from-file"
    with pytest.raises(ConfigError, match="cannot be read"):
        parse_config(_base(password=None, password_file=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match=r"\$UNSET_PW_VAR, which is not set"):
        parse_config(_base(password=None, password_env="UNSET_PW_VAR"))


def test_password_from_a_systemd_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "password").write_text("from-credential\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    s = parse_config(_base(password=None, password_credential="password"))
    assert s.upstream.secret_password() == "from-credential"
    with pytest.raises(ConfigError, match=r"cannot be read from .*LoadCredential=missing:"):
        parse_config(_base(password=None, password_credential="missing"))
    with pytest.raises(ConfigError, match="a credential name, not a path"):
        parse_config(_base(password=None, password_credential="../password"))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    with pytest.raises(ConfigError, match=r"needs \$CREDENTIALS_DIRECTORY.*use password_file"):
        parse_config(_base(password=None, password_credential="password"))


def test_secrets_never_print() -> None:
    s = parse_config(_base(password="hunter2-secret"))
    assert "hunter2-secret" not in repr(s) and "hunter2-secret" not in str(s.model_dump())


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not found; copy config\.example\.toml"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[upstream\nbase_url = 1")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)


def test_a_retired_key_loads_and_is_named_with_what_replaced_it() -> None:
    """`[schedule] reconcile_interval` does nothing since the rolling proof: a file that sets it
    loads (older configurations keep working) and `Settings.retired` names it for the daemon's
    start-up warning; a file that does not set it gets no line."""
    assert parse_config(_base()).retired() == []
    lines = parse_config({**_base(), "schedule": {"reconcile_interval": 3600}}).retired()
    assert len(lines) == 1
    assert "reconcile_interval is no longer used" in lines[0]
    assert "staleness_bound" in lines[0]


def test_a_notice_limit_an_allowed_batch_exceeds_is_named_at_start() -> None:
    """Older examples set `max_body_bytes = 1048576`: a batch of 12,000 notices got 413 five
    times and the upstream dropped the subscription. Such a file still loads, and
    `Settings.cautions` gives the daemon's start-up warning; the default gets no line, nor does
    a daemon without the receiver."""
    assert parse_config(_base()).cautions() == []
    small = {**_base(), "webhooks": {"max_body_bytes": 1 << 20}}
    (line,) = parse_config(small).cautions()
    assert "max_body_bytes = 1048576 refuses (413)" in line and "remove the key" in line
    off = {**_base(), "webhooks": {"max_body_bytes": 1 << 20, "enabled": False}}
    assert parse_config(off).cautions() == []
