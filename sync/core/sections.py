"""What every section of the configuration shares, and the optional `[management]` section.

`Section` forbids keys it does not know (a typo is an error naming the key, with a "did you
mean", `sync.core.configerrors`) and is frozen once read; `http_url` checks a base URL. The
whole file is `sync.core.config.Settings`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sync.core.errors import ConfigError
from sync.core.secrets import given, read_secret, resolving, sources


class Section(BaseModel):
    """A table of the file: no key it does not know, frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def http_url(v: str) -> str:
    """A base URL: http(s) only, without a trailing slash (paths are appended to it)."""
    if not v.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return v.rstrip("/")


class ManagementSettings(Section):
    """`[management]` (optional): the management API v1 (press releases, article/message updates)."""

    base_url: str = Field(description="Base URL of the management API, without a trailing /")
    product: str = Field(description="API product, sent as X-Product-Name")
    loyalty_club: str = Field(description="Loyalty club slug, sent as X-Loyalty-Club-Slug")
    customer: str | None = Field(default=None, description="Customer, sent as X-Customer")
    client_id: str = Field(default="sync", description="Client identifier, sent as X-User-Agent")
    bearer_token: SecretStr | None = Field(
        default=None,
        description="User token (Authorization: Bearer); the press release list and the message "
        "update need it",
    )
    bearer_token_env: str | None = Field(
        default=None, description="Environment variable holding the bearer token"
    )
    bearer_token_file: Path | None = Field(
        default=None, description="File holding the bearer token"
    )
    bearer_token_credential: str | None = Field(
        default=None, description="systemd credential holding the bearer token"
    )
    client_token: SecretStr | None = Field(
        default=None, description="Client token (X-Client-Authorization)"
    )
    client_token_env: str | None = Field(
        default=None, description="Environment variable holding the client token"
    )
    client_token_file: Path | None = Field(
        default=None, description="File holding the client token"
    )
    client_token_credential: str | None = Field(
        default=None, description="systemd credential holding the client token"
    )
    locales: list[str] = Field(
        default_factory=lambda: ["en"], description="Locales (X-Locale) to mirror press releases in"
    )
    per_page: int = Field(
        default=100, ge=1, le=100, description="per_page of the press release listing"
    )
    press_releases_interval: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds between full press release listings in the daemon",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_url(v)

    @field_validator("locales")
    @classmethod
    def _locales(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError('name at least one locale, e.g. ["en"]')
        return v

    @model_validator(mode="after")
    def _tokens(self, info: ValidationInfo) -> ManagementSettings:
        resolve = resolving(info)
        keys = ("bearer_token", "client_token")
        bearer, client = (read_secret(*given(self, k), resolve=resolve) for k in keys)
        if not any(sources(*given(self, k)) for k in keys):
            raise ValueError("set a bearer_token or a client_token (inline, *_env or *_file)")
        object.__setattr__(self, "bearer_token", bearer)
        object.__setattr__(self, "client_token", client)
        return self

    def require_user_token(self, operation: str) -> SecretStr:
        """The user token, or a ConfigError naming the key to set: the spec labels the press
        release list and the message update "Authorization: user token", while the article
        update takes either credential (a client token alone is enough there)."""
        if self.bearer_token is None:
            raise ConfigError(
                f"[management] bearer_token is required for {operation}: the spec labels it "
                '"user token" (Authorization: Bearer) and a client_token alone is not enough; '
                "set bearer_token, bearer_token_env, bearer_token_file or bearer_token_credential"
            )
        return self.bearer_token
