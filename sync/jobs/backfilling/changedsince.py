"""The missed-row signal "a row of a top-level type changed since the backfill started".

A row that changes while the backfill walks its type can leave a listing mid-walk (a deal made
Private leaves the Public listing), which page-number paging turns into a skipped row. The
upstream is asked, per scope, for the rows stamped at or after the backfill's start
(`filter[updated_at][gte]`, ids and stamps only). That start is the stamps' *lower bound*
(`sync.jobs.backfilling.backfillrun`, `sync.channel.clock`), so on an upstream that was idle before the
backfill the rows stamped in the seconds before its newest stamp come back too, although
nothing changed. So a row only counts as evidence when the walk cannot have read it as it is:

- absent from the mirror, or held with another `updated_at`: it changed after its page was
  read (or was never read): evidence;
- held with the same `updated_at` in a type of one scope: the walk read this very version,
  and an update moves no row within a listing sorted by id: no evidence;
- held with the same `updated_at` in a type of several scopes (deals, per visibility): the walk
  may have read it in the listing it joined after leaving another mid-walk: evidence, unless
  its `created_at` equals its `updated_at` (never changed since it was created, so it never
  moved between listings).

Pages of `page[size]` rows are read until one holds evidence or the result ends; a result
longer than `PAGES` pages is taken as evidence without reading on (a bulk change, or an upstream
busy enough that the pass is cheap beside it). Mall-scoped rows move between malls without a
new stamp: no request can show that, and `sync.jobs.backfilling.missedrows.MissedRows.moved` and the
reconcile's listings catch it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import normalize_or_none
from sync.store import MirrorStore

#: Pages of the check read per scope before a longer result is taken as evidence.
PAGES = 4


class Listed(Protocol):
    """What `changed_since` asks of the upstream client (`ChannelClient`, or a test's fake):
    listing pages, and the stop rule (`paging`)."""

    paging: Paging

    async def list_page(self, request: Scope | Listing, number: int) -> Page: ...


async def changed_since(
    client: Listed, mirror: MirrorStore, rtype: ResourceType, started_at: str
) -> bool:
    """Whether a row of a top-level type shows a change since `started_at` that the walk may
    not have read (see the module docstring)."""
    if rtype.level != "top" or not rtype.has_updated_at:
        return False
    several = len(rtype.scope_params) > 1
    fields = ["updated_at", "created_at"] if several else ["updated_at"]
    for scope in scopes_of(rtype, []):
        number = 1
        while True:
            since = {"filter[updated_at][gte]": started_at}
            page = await client.list_page(Listing(scope, since, fields, include=False), number)
            if _evidence(mirror, rtype, page.resources, several=several):
                return True
            if not client.paging.more(page):
                break
            if number >= PAGES:
                return True  # more than `PAGES` pages changed: run the pass
            number += 1
    return False


def _evidence(
    mirror: MirrorStore, rtype: ResourceType, rows: Sequence[dict[str, Any]], *, several: bool
) -> bool:
    """Whether one page of the check holds a row the walk cannot have read as it is now."""
    if not rows:
        return False
    try:
        ids = [int(r["id"]) for r in rows]
    except (KeyError, TypeError, ValueError):
        return True  # a row this client cannot place: take it as a change
    held = mirror.table(rtype.name).stamps(ids)
    for rid, row in zip(ids, rows, strict=True):
        attrs = row.get("attributes") or {}
        stamp = normalize_or_none(attrs.get("updated_at"))
        if stamp is None or held.get(rid) != stamp:
            return True
        if several and normalize_or_none(attrs.get("created_at")) != stamp:
            return True
    return False
