"""The backfill's missed-row pass: whether page-number paging can have skipped a row of a type.

Pages are sorted by id, so creates land at the end and updates move nothing: a row is skipped
only when a row before it leaves the listing mid-walk. The pass itself is the reconcile
(`sync.jobs.reconcile`, ids and stamps listed again); it costs a listing of the whole type, so
it runs only on evidence that something left: what the walk saw (a short page, a `links.last`
that moved) or what the upstream says changed since the backfill started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.core.errors import UpstreamError
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import scopes_of
from sync.store import Mirror


class MissedRows:
    """What the backfill's walk noticed, and the decision whether a type needs the pass."""

    def __init__(self, client: ChannelClient, mirror: Mirror) -> None:
        self.client = client
        self.mirror = mirror
        self.log = get_logger("sync.backfill")
        # Types that got a page shorter than page[size] before `links.last`: rows went missing.
        self.short_pages: set[str] = set()
        # Types whose listing changed while walked (`links.last` moved, pages past it).
        self.shifted: set[str] = set()

    def saw_page(self, name: str, *, number: int, last: int, rows: int, walked_last: int) -> None:
        """Note what one written page says about its listing (`walked_last`: the `links.last`
        the walk started from)."""
        if number < last and rows < self.client.paging.size:
            self.short_pages.add(name)
        if last != walked_last and rows:
            # `links.last` moved while the listing was walked: rows left it or joined it, and
            # with page numbers a row that left shifts every later row one place earlier (one
            # is skipped). The missed-row pass lists the scope again.
            self.shifted.add(name)

    async def needed(self, rtype: ResourceType, started_at: str) -> bool:
        """Whether the missed-row pass can find anything for this type.

        The pass is needed when the deletions feed shows deletions of this type since the
        backfill started, or when the mirror held rows of the type before it (some may be gone
        upstream), or when the walk saw a short page or a moving `links.last`, or when a row
        changed since the start. When the feed cannot be read, run the pass.
        """
        prefilled = (self.mirror.get_meta("backfill_prefilled") or "").split(",")
        if rtype.name in prefilled:
            return True
        if rtype.name in self.short_pages:
            self.log.info(
                "backfill.short_page", type=rtype.name, hint="running the missed-row pass"
            )
            return True
        if rtype.name in self.shifted:
            self.log.info(
                "backfill.listing_shifted", type=rtype.name, hint="running the missed-row pass"
            )
            return True
        try:
            async for page in self._deletions_since(started_at):
                for entry in page.resources:
                    raw = str((entry.get("attributes") or {}).get("resource_type", ""))
                    name = catalogue.normalize_type(raw)
                    if name is None:
                        # A type this client cannot map may be this one (`sync.jobs.feed`).
                        self.log.info(
                            "backfill.unknown_deletion_type",
                            type=rtype.name,
                            resource_type=raw[:60],
                            hint="running the missed-row pass",
                        )
                    if name in (rtype.name, None):
                        return True
            if await self._changed_since(rtype, started_at):
                self.log.info(
                    "backfill.changed_while_walked",
                    type=rtype.name,
                    hint="a row that changed may have left a listing mid-walk (a deal made "
                    "Private) and shifted later rows: running the missed-row pass",
                )
                return True
        except UpstreamError as exc:
            self.log.info("backfill.deletions_unreadable", type=rtype.name, error=str(exc))
            return True
        return False

    async def _changed_since(self, rtype: ResourceType, started_at: str) -> bool:
        """Whether any row of a top-level type changed since the backfill started (one row of
        `filter[updated_at][gte]` per scope). A row that changed can leave a listing mid-walk
        (a deal made Private leaves the Public listing), which page-number paging turns into a
        skipped row. Mall-scoped rows move between malls without a new stamp: no request can
        show that, and the reconcile's listings catch it."""
        if rtype.level != "top" or not rtype.has_updated_at:
            return False
        for scope in scopes_of(rtype, []):
            page = await self.client.list_page(
                rtype,
                1,
                scope_params=scope.params,
                params={"filter[updated_at][gte]": started_at},
                fields=["updated_at"],
                include=False,
                size=1,
            )
            if page.resources:
                return True
        return False

    async def _deletions_since(self, since: str) -> AsyncIterator[Page]:
        async for page in self.client.walk(lambda n: self.client.list_deletions(n, since=since)):
            yield page
