"""sync.core.sections: a section refuses keys it does not know and a base URL other than http(s);
`[management]` needs one of its tokens, and the user token where the spec labels it so."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sync.core.errors import ConfigError
from sync.core.sections import ManagementSettings, http_url

BASE = {"base_url": "https://m.example/api/", "product": "p", "loyalty_club": "c"}


def test_a_base_url_is_http_and_loses_its_trailing_slash() -> None:
    assert http_url("https://x.example/api/") == "https://x.example/api"
    with pytest.raises(ValueError, match="must start with http"):
        http_url("ftp://x.example")


def test_management_needs_a_token_and_knows_its_keys() -> None:
    with pytest.raises(ValidationError, match="set a bearer_token or a client_token"):
        ManagementSettings.model_validate(BASE)
    with pytest.raises(ValidationError, match="extra"):
        ManagementSettings.model_validate({**BASE, "client_token": "t", "tokn": "x"})
    settings = ManagementSettings.model_validate({**BASE, "client_token": "t"})
    assert settings.base_url == "https://m.example/api"
    with pytest.raises(ConfigError, match=r"\[management\] bearer_token is required"):
        settings.require_user_token("the press release list")
