"""Configuration: the TOML file users write, validated by pydantic into typed settings.

Every key has a default and a description here; `config.example.toml` documents each one and a
test keeps the two in step. `load_config` turns every validation problem into one `ConfigError`
line that names the key and the fix. Secrets (password, webhook secret) may come from the file,
an environment variable (`*_env`) or a file path (`*_file`, e.g. a systemd credential); they are
held as `SecretStr` so they never print.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, Self, get_args

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sync.core.configerrors import describe
from sync.core.errors import ConfigError
from sync.core.secrets import (
    SecretsNeeded,
    given,
    needed,
    read_secret,
    resolving,
    resolving_webhook,
    sources,
)
from sync.core.sections import ManagementSettings, Section, http_url
from sync.core.target import DEFAULT_SCHEMA, SCHEMA_NAME, MirrorTarget, is_url
from sync.model import catalogue

DEFAULT_PATH = Path("sync.toml")


class _PasswordSource(Section):
    """An account's password, given by exactly one source (inline, `*_env`, `*_file` or
    `*_credential`), resolved as every secret is (`read_secret`): the single account of
    `[upstream]` and each `[[upstream.accounts]]` share these keys and this check."""

    password: SecretStr | None = Field(default=None, description="Account password (inline)")
    password_env: str | None = Field(
        default=None, description="Environment variable holding the password"
    )
    password_file: Path | None = Field(default=None, description="File holding the password")
    password_credential: str | None = Field(
        default=None, description="systemd credential holding the password"
    )

    def _needs_password(self) -> bool:
        """Whether this model must name a password source (always, for an account)."""
        return True

    @model_validator(mode="after")
    def _password(self, info: ValidationInfo) -> Self:
        secret = read_secret(*given(self, "password"), resolve=resolving(info))
        if self._needs_password() and not sources(*given(self, "password")):
            raise ValueError(
                "set one of password, password_env, password_file or password_credential"
            )
        object.__setattr__(self, "password", secret)
        return self

    def secret_password(self) -> str:
        """The resolved password; call only where it is sent to the upstream."""
        if self.password is None:  # loaded with secrets=False: a reader's configuration
            raise ConfigError(
                "this command loaded the configuration without its secrets; "
                "the upstream password is read only by commands that talk to the upstream"
            )
        return self.password.get_secret_value()


class AccountSettings(_PasswordSource):
    """`[[upstream.accounts]]`: one account of several (an upstream that issues one account per
    channel set); its e-mail and its own password source."""

    email: str = Field(description="Account e-mail used for POST /accounts/login")


#: How `max_requests_per_second` applies to several accounts: one budget they all take from
#: (`shared`), or a budget of that rate for each (`per_account`).
BudgetMode = Literal["shared", "per_account"]


class UpstreamSettings(_PasswordSource):
    """`[upstream]`: where the Channel Content API is and how to talk to it."""

    base_url: str = Field(description="Base URL of the Channel Content API, without a trailing /")
    email: str | None = Field(
        default=None,
        description="Account e-mail used for POST /accounts/login (the single account; or "
        "[[upstream.accounts]])",
    )
    accounts: list[AccountSettings] | None = Field(
        default=None,
        description="Several accounts instead of email and its password: each type is read by "
        "an account whose channels allow it",
    )
    budget: BudgetMode = Field(
        default="shared",
        description="With several accounts: one max_requests_per_second budget for all "
        "(shared) or one for each (per_account)",
    )
    types: list[str] = Field(
        default_factory=list, description="Resource types to mirror; empty means all readable"
    )
    page_size: int = Field(default=100, ge=1, le=100, description="page[size] of every listing")
    concurrency: int = Field(default=4, ge=1, le=64, description="Requests in flight at once")
    max_requests_per_second: float = Field(
        default=20.0,
        ge=0,
        description="Request budget shared by every job (never exceeded in any second); 0 = none",
    )
    mall_includes: Literal["auto", "off"] = Field(
        default="auto",
        description="Poll and locate the mall-scoped types through GET /malls?include= when the "
        "upstream serves it (detected at run time); off: per-mall listings only",
    )
    members_page_size: int = Field(
        default=100, ge=1, le=100, description="Malls per GET /malls?include= request"
    )
    timeout: float = Field(default=30.0, gt=0, description="Seconds before one request times out")
    retry_budget: float = Field(
        default=300.0, gt=0, description="Seconds one request may spend retrying before failing"
    )
    max_backoff: float = Field(default=30.0, gt=0, description="Longest wait between two retries")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_url(v)

    @field_validator("types")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        unknown = [t for t in v if t not in catalogue.LISTABLE]
        if unknown:
            raise ValueError(
                f"unknown type(s) {', '.join(unknown)}; choose from {', '.join(catalogue.LISTABLE)}"
            )
        return v

    def _needs_password(self) -> bool:
        return self.accounts is None and self.email is not None

    @model_validator(mode="after")
    def _accounts(self) -> UpstreamSettings:
        """Either the single account (email and its password) or `accounts`, never both."""
        if self.accounts is None:
            if self.email is None:
                raise ValueError("set email and a password source, or list [[upstream.accounts]]")
            return self
        if self.email is not None or sources(*given(self, "password")):
            raise ValueError(
                "give either email (with its password) or [[upstream.accounts]], not both"
            )
        if not self.accounts:
            raise ValueError(
                "accounts is empty: list at least one [[upstream.accounts]] (email and a "
                "password source), or give email and its password instead"
            )
        emails = [a.email for a in self.accounts]
        if len(set(emails)) < len(emails):
            raise ValueError("accounts: each [[upstream.accounts]] needs its own email")
        return self

    def all_accounts(self) -> list[AccountSettings]:
        """The accounts in the order given: `accounts`, or the single one (`email` and its
        password) as a one-item list. Nothing is resolved again: the secrets are already read."""
        if self.accounts is not None:
            return list(self.accounts)
        return [
            AccountSettings.model_construct(
                email=self.email,
                password=self.password,
                password_env=self.password_env,
                password_file=self.password_file,
                password_credential=self.password_credential,
            )
        ]

    def mirrored_types(self) -> list[catalogue.ResourceType]:
        """Configured listable types in backfill order (all when none are configured)."""
        return catalogue.resolve(self.types or catalogue.LISTABLE)


#: Who checkpoints the mirror's WAL: `sqlite` (SQLite's own automatic PASSIVE checkpoints,
#: every ~4 MiB of WAL, ~64 MiB during a bulk load) or `litestream` (none by sync: Litestream,
#: replicating the file, checkpoints once it has copied the WAL; see README "Scaling out").
CheckpointMode = Literal["sqlite", "litestream"]
CHECKPOINT_MODES: tuple[str, ...] = get_args(CheckpointMode)


class MirrorSettings(Section):
    """`[mirror]`: the SQLite file (`path`, the default), or a PostgreSQL database (`url`) and
    the schema in it (issue #49). `target` is the one the commands and the daemon open."""

    path: Path = Field(default=Path("mirror.db"), description="Path of the SQLite mirror file")
    # repr=False: the URL may hold the password, and a settings object may be printed.
    url: str | None = Field(
        default=None,
        repr=False,
        description="PostgreSQL database to mirror into instead of the SQLite file "
        "(postgresql://user:password@host:5432/dbname; the password may instead come from "
        "PGPASSWORD or ~/.pgpass)",
    )
    schema_: str = Field(
        default=DEFAULT_SCHEMA,
        alias="schema",
        description="PostgreSQL schema the mirror's tables live in (with url)",
    )
    changes_retention_days: float = Field(
        default=7.0, gt=0, description="Days the change feed (_sync_changes) keeps its entries"
    )
    checkpoints: CheckpointMode = Field(
        default="sqlite",
        description="Who checkpoints the WAL: sqlite (its automatic PASSIVE checkpoints) or "
        "litestream (left to Litestream replicating the file); SQLite only",
    )

    @field_validator("checkpoints", mode="before")
    @classmethod
    def _checkpoints(cls, v: object) -> object:
        if v not in CHECKPOINT_MODES:
            raise ValueError(
                f'must be "sqlite" (sync checkpoints the WAL itself) or "litestream" '
                f"(Litestream replicates the mirror and checkpoints it), not {v!r}"
            )
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        # Never the value in the message: it may hold the password.
        if v is not None and not is_url(v):
            raise ValueError(
                "must start with postgresql:// or postgres:// (for an SQLite file, set "
                "[mirror] path instead)"
            )
        return v.strip() if v is not None else None

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: str) -> str:
        if not SCHEMA_NAME.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a plain schema name; use lowercase letters, digits and _, "
                "not starting with a digit, at most 63 characters (e.g. ccsync)"
            )
        return v

    @model_validator(mode="after")
    def _one_store(self) -> Self:
        if self.url is not None and "path" in self.model_fields_set:
            raise ValueError("set [mirror] path or url, not both")
        return self

    @property
    def target(self) -> MirrorTarget:
        """The mirror these settings name: the PostgreSQL schema when `url` is set, else the
        SQLite file."""
        if self.url is not None:
            return MirrorTarget(url=self.url, schema=self.schema_)
        return MirrorTarget(path=self.path)


class BackfillSettings(Section):
    """`[backfill]`: the one-shot bulk load (`ccsync backfill`, and `ccsync run` on an empty mirror)."""

    parse_workers: int = Field(
        default=1,
        ge=0,
        le=16,
        description="Processes that parse and stage pages while the main process downloads "
        "and writes (0: all in the main process)",
    )


#: A receiver without its secret (`ccsync run`, `ccsync webhooks ...`): every source named.
MISSING_WEBHOOK_SECRET = (
    "secret is required when webhooks are enabled; set secret, secret_env, secret_file or "
    "secret_credential (16+ random characters), or set enabled = false to rely on polling"
)


#: The default `max_body_bytes`: twice the largest batch an upstream plausibly sends (100,000
#: notices, 8.4 MiB; the spec states no batch size). Below it the daemon warns at start
#: (`Settings.cautions`).
NOTICE_BODY_FLOOR = 16 << 20


class WebhookSettings(Section):
    """`[webhooks]`: the receiver the upstream posts change notices to."""

    enabled: bool = Field(default=True, description="Run the webhook receiver in `ccsync run`")
    listen: str = Field(default="127.0.0.1:8787", description="host:port the receiver binds")
    public_url: str | None = Field(
        default=None,
        description="URL the upstream reaches the receiver at (default http://<listen>)",
    )
    secret: SecretStr | None = Field(
        default=None, description="Secret path segment of the callback"
    )
    secret_env: str | None = Field(
        default=None, description="Environment variable holding the secret"
    )
    secret_file: Path | None = Field(default=None, description="File holding the secret")
    secret_credential: str | None = Field(
        default=None, description="systemd credential holding the secret"
    )
    topics: list[str] = Field(
        default_factory=list, description="Topics to subscribe; empty = mirrored types"
    )
    max_body_bytes: int = Field(
        default=NOTICE_BODY_FLOOR,
        ge=1024,
        description=(
            "Largest notice body accepted (16 MiB: twice a batch of 100,000 notices, 8.4 MiB; "
            "the spec states no batch size). A larger body is answered 413 at once, from its "
            "Content-Length when it has one"
        ),
    )
    body_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a sender may take to deliver each MiB (begun) of a notice body",
    )

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, _, port = v.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError("must be host:port, e.g. 127.0.0.1:8787")
        return v

    @model_validator(mode="after")
    def _secret(self, info: ValidationInfo) -> WebhookSettings:
        resolve = resolving_webhook(info)
        secret = read_secret(*given(self, "secret"), resolve=resolve)
        if resolve and secret is not None and len(secret.get_secret_value()) < 16:
            raise ValueError(
                "secret must be at least 16 characters (it is the callback's only guard)"
            )
        if needed(info) == "receiver" and self.enabled and secret is None:
            raise ValueError(MISSING_WEBHOOK_SECRET)
        object.__setattr__(self, "secret", secret if resolve else None)
        return self

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0]

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


class ScheduleSettings(Section):
    """`[schedule]`: how often the daemon's jobs run, in seconds."""

    poll_interval: float = Field(default=60.0, gt=0, description="Incremental poll per type")
    poll_overlap: float = Field(
        default=5.0,
        ge=0,
        description="Seconds the poll re-reads behind its cursor at least (its lookback's floor)",
    )
    poll_lookback_max: float = Field(
        default=600.0,
        ge=0,
        description="Ceiling of the lookback learned from late commits; every 3rd poll of a "
        "scope re-reads this far behind its cursor",
    )
    deletions_interval: float = Field(default=60.0, gt=0, description="Deletions feed poll")
    reconcile_interval: float = Field(
        default=86400.0,
        gt=0,
        description="Unused by the daemon since the rolling proof (staleness_bound) replaced "
        "its daily reconcile; kept so older configurations load",
    )
    staleness_bound: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds within which the rolling proof compares every scope's ids and "
        "stamps with the mirror once (and repairs what differs)",
    )
    reconcile_max_delete_share: float = Field(
        default=0.2, gt=0, le=1, description="Largest share of a table one reconcile may delete"
    )
    verify_interval: float = Field(
        default=604800.0,
        gt=0,
        description="Seconds in which the rolling verify refetches the whole mirror once",
    )
    hours_interval: float = Field(default=3600.0, gt=0, description="Refresh of mall hours")
    hours_days: int = Field(
        default=30,
        ge=0,
        le=366,
        description="Days ahead the hours window covers (from the day before the UTC date)",
    )
    subscriptions_interval: float = Field(
        default=300.0, gt=0, description="Check of webhook subscriptions"
    )
    queue_batch_delay: float = Field(
        default=0.05, ge=0, description="Debounce before draining the queue"
    )


class LogSettings(Section):
    """`[logging]`."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged"
    )
    format: Literal["auto", "console", "json"] = Field(
        default="auto", description="auto: console on a terminal, JSON lines otherwise"
    )


class Settings(Section):
    """The whole configuration file."""

    upstream: UpstreamSettings
    mirror: MirrorSettings = Field(default_factory=MirrorSettings)
    backfill: BackfillSettings = Field(default_factory=BackfillSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    logging: LogSettings = Field(default_factory=LogSettings)
    management: ManagementSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _sections_validated(cls, data: Any) -> Any:
        """An absent `[webhooks]` is validated as an empty one, with the secrets context (a
        default built by `default_factory` never sees it): `ccsync run` without the section
        needs the webhook secret as it does with it (webhooks are on by default)."""
        if isinstance(data, dict) and "webhooks" not in data:
            return {**data, "webhooks": {}}
        return data

    def retired(self) -> list[str]:
        """One line for each key the file sets that no longer does anything (kept so older
        configurations load), naming what replaced it: the daemon logs them at start, so an
        operator who tunes such a key learns it changes nothing."""
        out = []
        if "reconcile_interval" in self.schedule.model_fields_set:
            out.append(
                "[schedule] reconcile_interval is no longer used: the rolling proof replaced the "
                "daily reconcile; set [schedule] staleness_bound instead and remove the key"
            )
        return out

    def cautions(self) -> list[str]:
        """One line for each value the file sets that makes the daemon refuse what the spec
        allows, and its fix; logged at start, as `retired` lines are. Today: a notice body
        limit a batch the spec permits can exceed (older examples wrote 1 MiB), which answers
        413 and gives the upstream a reason to drop the subscription."""
        out = []
        w = self.webhooks
        if w.enabled and w.max_body_bytes < NOTICE_BODY_FLOOR:
            out.append(
                f"[webhooks] max_body_bytes = {w.max_body_bytes} refuses (413) a batch of "
                f"{NOTICE_BODY_FLOOR // (1 << 20)} MiB or more, about 100,000 notices, and the "
                "spec promises no batch size: an upstream may drop the subscription over it; "
                f"remove the key ({NOTICE_BODY_FLOOR // (1 << 20)} MiB by default)"
            )
        return out


def parse_config(
    data: dict[str, Any], path: Path = DEFAULT_PATH, *, secrets: bool | SecretsNeeded = True
) -> Settings:
    """Validate an already-parsed TOML mapping; raise one ConfigError naming the first problem.
    `secrets` says which secrets are read (`sync.core.secrets.SecretsNeeded`; True: all,
    False: none, the settings of a reader)."""
    try:
        return Settings.model_validate(data, context={"secrets": secrets})
    except ValidationError as exc:
        errors = exc.errors()
        lines = [describe(dict(e), path, Settings) for e in errors]
        raise ConfigError("; ".join(lines)) from None


def load_config(
    path: Path | str | None = None, *, secrets: bool | SecretsNeeded = True
) -> Settings:
    """Read and validate the TOML file at `path` (default ./sync.toml), reading the secrets
    `secrets` names (`parse_config`)."""
    p = Path(path) if path is not None else DEFAULT_PATH
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"config file {p} not found; copy config.example.toml to {p} or pass --config"
        ) from None
    except OSError as exc:
        raise ConfigError(f"config file {p} cannot be read: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p} is not valid TOML: {exc}; fix the syntax at that line") from None
    return parse_config(data, p, secrets=secrets)
