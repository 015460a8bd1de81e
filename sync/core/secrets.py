"""Secrets in the configuration: a password, token or webhook secret given inline, by
environment variable (`*_env`), by file (`*_file`) or by systemd credential (`*_credential`).

Each is resolved once, when the configuration is validated, and registered with
`sync.core.redact` so no output of this process shows it; a reader's configuration
(`WITHOUT_SECRETS`) checks only the shape and reads nothing. Apart from `sync.core.config`
because every section with a secret shares these rules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, SecretStr, ValidationInfo

from sync.core.redact import register

#: Which secrets a command resolves, as the validation context's `secrets` (`load_config(...,
#: secrets=...)`); each command asks only for the secrets it uses:
#: - "none": commands that only read the mirror (`status`, `changes`, `datasette-metadata`)
#:   never open a secret's file, variable or credential, so they run from a shell under the
#:   service's configuration;
#: - "upstream": every secret but the webhook secret (`backfill`, `reconcile`, `probe`, the
#:   management commands): they serve no receiver;
#: - "all": every secret given (the library's default);
#: - "receiver": every secret, and the webhook secret is required while `[webhooks] enabled`
#:   (`run`, `webhooks ...`: the callback URL holds it; `check`, which checks what `run` needs).
SecretsNeeded = Literal["none", "upstream", "all", "receiver"]
WITHOUT_SECRETS = {"secrets": "none"}


def needed(info: ValidationInfo) -> SecretsNeeded:
    """The secrets this validation resolves (`SecretsNeeded`; "all" when not told)."""
    value = (info.context or {}).get("secrets", "all")
    if value is True:
        return "all"
    if value is False:
        return "none"
    return cast(SecretsNeeded, value)


def resolving(info: ValidationInfo) -> bool:
    """Whether this validation resolves the secrets of the upstream and the management API
    (every command that talks to them)."""
    return needed(info) != "none"


def resolving_webhook(info: ValidationInfo) -> bool:
    """Whether this validation resolves the webhook secret (`run` and `webhooks ...` only)."""
    return needed(info) in ("all", "receiver")


def read_secret(
    value: SecretStr | None,
    env: str | None,
    path: Path | None,
    key: str,
    credential: str | None = None,
    *,
    resolve: bool = True,
) -> SecretStr | None:
    """Resolve a secret given inline, by environment variable name, by file path, or by the
    name of a systemd credential (`LoadCredential=NAME:...`), read from
    `$CREDENTIALS_DIRECTORY/NAME`: each unit gets its credentials under its own directory, so
    naming the credential lets one config file serve every unit. The value is registered
    with `sync.core.redact`: no log line, error or status output of this process shows it.
    With `resolve` false only the shape is checked (at most one source): nothing is read."""
    if not resolve:
        sources(value, env, path, key, credential)
        return value
    secret = find_secret(value, env, path, key, credential)
    if secret is not None:
        register(secret.get_secret_value())
    return secret


def given(model: BaseModel, key: str) -> tuple[Any, Any, Any, str, Any]:
    """The sources of secret `key` on `model`, as `_read_secret` takes them: `key` inline,
    `key_env`, `key_file`, the key's name, `key_credential`."""
    return (
        getattr(model, key),
        getattr(model, f"{key}_env"),
        getattr(model, f"{key}_file"),
        key,
        getattr(model, f"{key}_credential"),
    )


def sources(
    value: SecretStr | None, env: str | None, path: Path | None, key: str, credential: str | None
) -> list[str]:
    """The keys that give this secret; more than one is an error."""
    given = [
        n
        for n, v in (
            (key, value),
            (f"{key}_env", env),
            (f"{key}_file", path),
            (f"{key}_credential", credential),
        )
        if v
    ]
    if len(given) > 1:
        raise ValueError(f"give only one of {', '.join(given)}")
    return given


def find_secret(
    value: SecretStr | None,
    env: str | None,
    path: Path | None,
    key: str,
    credential: str | None,
) -> SecretStr | None:
    sources(value, env, path, key, credential)
    if credential:
        if "/" in credential or credential in (".", ".."):
            raise ValueError(f"{key}_credential is a credential name, not a path: {credential!r}")
        directory = os.environ.get("CREDENTIALS_DIRECTORY")
        if not directory:
            raise ValueError(
                f"{key}_credential = {credential!r} needs $CREDENTIALS_DIRECTORY, which is not set: "
                f"run under systemd with LoadCredential={credential}:<file>, or use {key}_file"
            )
        path = Path(directory) / credential
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(
                f"{key}_credential {credential!r} cannot be read from {directory}: {exc.strerror} "
                f"(is LoadCredential={credential}:<file> in the unit?)"
            ) from None
        return _not_empty(text, f"{key}_credential {credential!r} is empty in {directory}")
    if env:
        if env not in os.environ:
            raise ValueError(f"{key}_env names ${env}, which is not set in the environment")
        return _not_empty(
            os.environ[env],
            f"{key}_env names ${env}, which is set but empty; export the {key} in it",
        )
    if path:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"{key}_file {str(path)!r} cannot be read: {exc.strerror}") from None
        return _not_empty(text, f"{key}_file {str(path)!r} is empty; write the {key} in it")
    return value


def _not_empty(text: str, problem: str) -> SecretStr:
    """`text` as a secret; an empty one (`SYNC_PASSWORD=` in a unit's environment) is refused
    here, in one line naming its source, rather than sent and refused by the upstream."""
    if not text:
        raise ValueError(problem)
    return SecretStr(text)
