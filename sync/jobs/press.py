"""The management API's press releases, mirrored whole: every page of every configured locale.

One job for the backfill (after the Channel Content API's types) and for the daemon's
`press_releases` schedule. The listing walk and its proof of absence are the management client's
(`sync.management.client.mirror_press_releases`); the rows go to `sync.store.press`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sync.core.sections import ManagementSettings
from sync.management.client import ManagementClient
from sync.management.press import mirror_press_releases
from sync.store import MirrorStore


@dataclass(frozen=True)
class PressResult:
    """What one mirroring of the press releases did, all locales together."""

    rows: int
    removed: int


async def mirror_press(
    mirror: MirrorStore, settings: ManagementSettings, *, fail_fast: bool = True
) -> PressResult:
    """List every press release into the mirror; `fail_fast=False` in the daemon (an
    unreachable API is logged and retried)."""
    async with ManagementClient(settings, fail_fast=fail_fast) as client:
        result = await mirror_press_releases(client, mirror.press.open(), settings.locales)
    return PressResult(
        rows=sum(rows for rows, _ in result.values()),
        removed=sum(removed for _, removed in result.values()),
    )
