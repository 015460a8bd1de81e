"""sync.core.config: the account rules, the webhook and management sections, and the readers' view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sync.core.config import (
    MISSING_WEBHOOK_SECRET,
    AccountSettings,
    ManagementSettings,
    WebhookSettings,
    parse_config,
)
from sync.core.errors import ConfigError

URL = "http://127.0.0.1:1"


def _accounts(*emails: str) -> dict[str, Any]:
    return {
        "upstream": {
            "base_url": URL,
            "accounts": [{"email": e, "password": f"pw-{e}"} for e in emails],
        }
    }


def test_all_accounts_lists_the_single_account_or_the_accounts_in_order() -> None:
    single = parse_config({"upstream": {"base_url": URL + "/", "email": "a@x", "password": "p"}})
    assert single.upstream.base_url == URL
    [only] = single.upstream.all_accounts()
    assert isinstance(only, AccountSettings)
    assert (only.email, only.secret_password()) == ("a@x", "p")
    several = parse_config(_accounts("b@x", "a@x")).upstream.all_accounts()
    assert [(a.email, a.secret_password()) for a in several] == [
        ("b@x", "pw-b@x"),
        ("a@x", "pw-a@x"),
    ]


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        ({}, "set email and a password source, or list [[upstream.accounts]]"),
        (
            {"email": "a@x", "password": "p", "accounts": [{"email": "b@x", "password": "q"}]},
            "give either email (with its password) or [[upstream.accounts]], not both",
        ),
        (
            {"accounts": []},
            "accounts is empty: list at least one [[upstream.accounts]] (email and a password "
            "source), or give email and its password instead",
        ),
        (
            {"accounts": [{"email": "a@x", "password": "p"}, {"email": "a@x", "password": "q"}]},
            "accounts: each [[upstream.accounts]] needs its own email",
        ),
    ],
)
def test_the_account_rules_name_the_fix(upstream: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"upstream": {"base_url": URL, **upstream}})
    assert str(info.value) == f"sync.toml: upstream: {message}"


def test_a_readers_configuration_holds_no_password_and_says_so() -> None:
    settings = parse_config(
        {"upstream": {"base_url": URL, "email": "a@x", "password_env": "U1_NEVER_SET"}},
        secrets=False,
    )
    with pytest.raises(ConfigError, match="loaded the configuration without its secrets"):
        settings.upstream.secret_password()


def test_the_receiver_needs_its_secret_other_commands_do_not() -> None:
    base = {"upstream": {"base_url": URL, "email": "a@x", "password": "p"}}
    assert parse_config(base, secrets="upstream").webhooks.secret is None
    with pytest.raises(ConfigError) as info:
        parse_config({**base, "webhooks": {"listen": "127.0.0.1:8787"}}, secrets="receiver")
    assert str(info.value) == f"sync.toml: webhooks: {MISSING_WEBHOOK_SECRET}"
    off = parse_config({**base, "webhooks": {"enabled": False}}, secrets="receiver")
    assert off.webhooks.secret is None
    # the secret is held only where it is resolved
    given = {**base, "webhooks": {"secret": "s" * 16}}
    assert parse_config(given, secrets="upstream").webhooks.secret is None
    held = parse_config(given, secrets="receiver").webhooks.secret
    assert held is not None and held.get_secret_value() == "s" * 16


def test_the_receiver_needs_its_secret_when_the_webhooks_section_is_absent() -> None:
    base = {"upstream": {"base_url": URL, "email": "a@x", "password": "p"}}
    with pytest.raises(ConfigError, match="secret is required when webhooks are enabled"):
        parse_config(base, secrets="receiver")


def test_listen_splits_into_host_and_port_and_refuses_a_port_out_of_range() -> None:
    hooks = WebhookSettings(listen="[::1]:9000")
    assert (hooks.host, hooks.port) == ("[::1]", 9000)
    with pytest.raises(ValueError, match="must be host:port"):
        WebhookSettings(listen="127.0.0.1:65536")


def test_management_needs_a_token_and_the_user_token_where_the_spec_says() -> None:
    fields: dict[str, Any] = {"base_url": "https://m/", "product": "p", "loyalty_club": "c"}
    with pytest.raises(ValueError, match="set a bearer_token or a client_token"):
        ManagementSettings(**fields)
    with pytest.raises(ValueError, match=r"name at least one locale"):
        ManagementSettings(**fields, client_token="c" * 8, locales=[])
    client_only = ManagementSettings(**fields, client_token="c" * 8)
    assert client_only.base_url == "https://m"
    with pytest.raises(ConfigError) as info:
        client_only.require_user_token("the press release list")
    assert str(info.value).startswith(
        "[management] bearer_token is required for the press release list: "
    )
    user = ManagementSettings(**fields, bearer_token="b" * 8)
    assert user.require_user_token("x").get_secret_value() == "b" * 8


def _mirror(**mirror: Any) -> dict[str, Any]:
    return {"upstream": {"base_url": URL, "email": "a@x", "password": "p"}, "mirror": mirror}


def test_the_mirror_target_is_the_sqlite_file_unless_a_url_is_set() -> None:
    default = parse_config(_mirror()).mirror.target
    assert (default.path, default.url) == (Path("mirror.db"), None)
    assert parse_config(_mirror(path="/var/m.db")).mirror.target.path == Path("/var/m.db")
    pg = parse_config(_mirror(url=" postgres://u@h/db ", schema="tenant_2")).mirror.target
    assert (pg.path, pg.url, pg.schema) == (None, "postgres://u@h/db", "tenant_2")
    assert parse_config(_mirror(url="postgresql://h/db")).mirror.target.schema == "ccsync"


@pytest.mark.parametrize(
    ("mirror", "message"),
    [
        (
            {"url": "mysql://u:Secret-pw-1@h/db"},
            "mirror.url: must start with postgresql:// or postgres:// (for an SQLite file, "
            "set [mirror] path instead)",
        ),
        (
            {"url": "postgresql://u:Secret-pw-1@h/db", "path": "m.db"},
            "set [mirror] path or url, not both",
        ),
        ({"url": "postgresql://h/db", "schema": "Mirror"}, "mirror.schema: 'Mirror' is not"),
        ({"schema": "1st"}, "use lowercase letters, digits and _, not starting with a digit"),
        ({"schema": "a" * 64}, "at most 63 characters"),
        ({"schema": 'x"; drop'}, "is not a plain schema name"),
    ],
)
def test_the_mirror_settings_refuse_in_one_line_without_the_password(
    mirror: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_mirror(**mirror))
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "Secret-pw-1" not in text


def test_the_mirror_url_is_not_in_the_settings_repr() -> None:
    settings = parse_config(_mirror(url="postgresql://u:Secret-pw-1@h/db"))
    assert "Secret-pw-1" not in repr(settings) and "Secret-pw-1" not in str(settings.mirror)
    assert "Secret-pw-1" not in repr(settings.mirror.target)
