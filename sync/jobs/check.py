"""The operator's check of a configuration (`ccsync check`): what it says, and optionally whether
the upstream accepts its accounts, with no mirror opened and no row written.

Validation itself is `sync.core.config.load_config` (one `ConfigError` line naming the key and
the fix); this module words what a valid configuration will do, and logs each account in once
when asked, so a typo in a password shows before a backfill or a daemon starts.
"""

from __future__ import annotations

from pathlib import Path

from sync.channel.client import ChannelClient
from sync.core.config import AccountSettings, Settings


def _password_source(account: AccountSettings) -> str:
    """Where an account's password comes from, never the password: `$SYNC_PASSWORD`, a file,
    a credential, or inline (once resolved, `password` holds the value whatever its source)."""
    if account.password_env:
        return f"${account.password_env}"
    if account.password_file:
        return f"file {account.password_file}"
    if account.password_credential:
        return f"credential {account.password_credential}"
    return "inline"


def summary(settings: Settings, path: Path) -> str:
    """One line saying what the configuration at `path` will do (no secret, no e-mail: both
    are auth parameters, which no output carries)."""
    up = settings.upstream
    accounts = up.all_accounts()
    passwords = ", ".join(_password_source(a) for a in accounts)
    noun = "account" if len(accounts) == 1 else "accounts"
    types = len(up.mirrored_types())
    hooks = settings.webhooks
    webhooks = f"webhooks on {hooks.listen}" if hooks.enabled else "webhooks off (polling only)"
    parts = [
        f"upstream {up.base_url}, {len(accounts)} {noun} (password from {passwords})",
        f"{types} types" + ("" if up.types else " (all)"),
        f"mirror {settings.mirror.target.describe()}",
        webhooks,
    ]
    if settings.management is not None:
        parts.append(f"management API {settings.management.base_url}")
    return f"{path}: " + "; ".join(parts)


async def log_in(settings: Settings) -> int:
    """Log every configured account in once (`POST /accounts/login`); the number logged in.
    A refused login raises `LoginRefusedError`, an upstream that cannot be reached
    `UnreachableError`, as every command's first request would."""
    async with ChannelClient(settings.upstream) as client:
        return await client.log_in(every=True)
