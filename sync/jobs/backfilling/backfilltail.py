"""What a backfill does after its pages: linkage the pages could not carry, and press releases.

The pages bring every row and the linkage their include paths serve. After them (and after the
end phase, which builds the views the mall routes check), three sources fill what is left:
the relationships' own routes for include paths the upstream refused (`sync.jobs.malls.relroutes`),
the mall routes for contacts' and deals' malls unless a cheaper source is proven
(`sync.jobs.malls.mallroutes`), and, when `[management]` is configured, the management API's press
releases (`sync.jobs.press`).
"""

from __future__ import annotations

from sync.channel.client import ChannelClient
from sync.core.config import Settings
from sync.core.errors import ForbiddenError, ListingUnsettledError
from sync.core.logs import get_logger
from sync.core.sections import ManagementSettings
from sync.jobs.malls.mallroutes import MallRoutes
from sync.jobs.malls.relroutes import RelatedRoutes
from sync.jobs.press import mirror_press
from sync.store import MirrorStore


async def fill_linkage(client: ChannelClient, mirror: MirrorStore, settings: Settings) -> None:
    """Linkage from the related routes, then contacts' and deals' malls from the mall routes.
    A mall route this account may not read (403) leaves a warning, not a failed backfill."""
    # None refused, nothing asked.
    await RelatedRoutes(client, mirror).fill(settings.upstream.mirrored_types())
    names = [t.name for t in settings.upstream.mirrored_types()]
    if not {"contacts", "deals"} & set(names):
        return
    try:
        await MallRoutes(client, mirror).refresh(
            names, list(mirror.table("malls").ids()), check_deals=False
        )
    except ForbiddenError as exc:
        get_logger("sync.backfill").warning("backfill.mall_routes_forbidden", hint=exc.hint)
    except ListingUnsettledError as exc:
        get_logger("sync.backfill").warning(
            "backfill.listing_unsettled",
            error=str(exc),
            hint="a mall's route kept changing under every walk: its memberships may be "
            "missing; run `ccsync reconcile` once it holds still",
        )
        raise


async def press_releases(
    mirror: MirrorStore, settings: ManagementSettings, *, fail_fast: bool = True
) -> tuple[int, int]:
    """The management API's press releases (`sync.jobs.press`): rows written, rows removed."""
    result = await mirror_press(mirror, settings, fail_fast=fail_fast)
    return result.rows, result.removed
