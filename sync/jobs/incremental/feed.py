"""The deletions feed applied: each entry is dated evidence about the one row it names.

An entry (`resource_type`, `resource_id`, `created_at`) deletes the mirrored row only if that
row is not newer than the entry (`TypeTable.apply_feed`, one transaction): a row stamped after the
entry is the id created again, written by a poll that ran before the feed's, and stays. The
entry's tombstone refuses older copies only (`sync.store.deletions`).

`resource_type` is mapped by `catalogue.normalize_type` (the spec writes "i-features" and "job
listings"; frameworks write "JobListing" or "PressRelease"). An entry whose type maps to nothing
is never silently dropped: a warning the first time each name is seen in this process, a
count per name (`on_unknown`: the daemon's `sync_feed_unknown_types_total{resource_type}`), and
a count kept in `_sync_meta` (`META_KEY`) that `ccsync status` shows. Entries are counted once
each (by their JSON:API id): the feed's overlap reads the newest again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from sync.channel.pages import Page
from sync.core.logs import get_logger
from sync.model import catalogue
from sync.model.stamps import normalize_or_none
from sync.pipeline.encoding import parse_id
from sync.store import MirrorStore

#: `_sync_meta` key of the counts of entries per unknown `resource_type` (JSON object).
META_KEY = "feed_unknown_types"
#: Distinct unknown names counted (metrics labels and the stored counts); the rest as OTHER.
NAMES_KEPT = 20
OTHER = "(other)"
#: Entry ids remembered so the feed's overlap does not count an unknown entry twice.
SEEN_KEPT = 10_000

_log = get_logger("sync.poll")
#: Unknown names already warned about in this process (once per name).
_warned: set[str] = set()


def unknown_types(mirror: MirrorStore) -> dict[str, int]:
    """The stored counts of feed entries per unknown `resource_type` (`ccsync status`)."""
    raw = mirror.meta.get(META_KEY)
    try:
        data = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


class FeedEntries:
    """Applies pages of the deletions feed to the mirrored types (`Poller.poll_deletions`)."""

    def __init__(
        self,
        mirror: MirrorStore,
        mirrored: set[str],
        *,
        on_unknown: Callable[[str, int], None] | None = None,
    ) -> None:
        self.mirror = mirror
        self.mirrored = mirrored
        self.on_unknown = on_unknown
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: Per listable type, rows stamped the very moment of their entry, for `filter[id]` to
        #: decide (`Poller.poll_deletions` asks): the entry alone cannot say which came last.
        self.tied: dict[str, list[int]] = {}
        #: Per type, rows newer than their entry: created again under a deleted id, kept; what
        #: the old row's deletion changed elsewhere is asked next (`sync.jobs.incremental.recreated`).
        self.kept: dict[str, list[int]] = {}

    def applies(self, name: str) -> bool:
        # Sideloaded types (images, tags, groups) have no route of their own, but the feed
        # lists their deletions too: applied wherever the mirror holds them.
        return name in self.mirrored or (
            not catalogue.TYPES[name].listable and self.mirror.schema.has_table(name)
        )

    def apply(self, page: Page) -> None:
        """Apply one page of entries: per type, in one transaction each."""
        by_type: dict[str, dict[int, str | None]] = {}
        unknown: dict[str, int] = {}
        for entry in page.resources:
            attrs = entry.get("attributes") or {}
            raw = str(attrs.get("resource_type", ""))
            name = catalogue.normalize_type(raw)
            if name is None:
                if self._first_time(entry):
                    key = raw.strip()[:60] or "(empty)"
                    unknown[key] = unknown.get(key, 0) + 1
                continue
            rid = attrs.get("resource_id")
            if self.applies(name) and isinstance(rid, int | str) and str(rid).isdigit():
                by_type.setdefault(name, {})[parse_id(rid)] = normalize_or_none(
                    attrs.get("created_at")
                )
        for name, entries in by_type.items():
            table = self.mirror.table(name)
            done = table.apply_feed(entries)
            if done.tied and catalogue.TYPES[name].listable:
                self.tied.setdefault(name, []).extend(done.tied)
            elif done.tied:  # a sideload has no route to ask: the entry decides, as before
                table.delete(done.tied)
            if done.kept:
                self.kept.setdefault(name, []).extend(done.kept)
                _log.info(
                    "deletions.row_newer_than_entry",
                    type=name,
                    ids=done.kept[:20],
                    count=len(done.kept),
                    hint="created again under the same id after the deletion: kept",
                )
            if done.unstamped:
                _log.warning(
                    "deletions.entry_without_created_at",
                    type=name,
                    entries=done.unstamped,
                    hint="no moment to compare with the mirrored rows' updated_at: stamped "
                    "rows are left to the reconcile, which asks filter[id]",
                )
        if unknown:
            self._count(unknown)

    def _first_time(self, entry: Mapping[str, Any]) -> bool:
        """Whether this entry (by its id) is counted for the first time in this process."""
        key = str(entry.get("id"))
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)
        return True

    def _count(self, unknown: dict[str, int]) -> None:
        stored = unknown_types(self.mirror)
        for raw, n in unknown.items():
            name = raw if raw in stored or len(stored) < NAMES_KEPT else OTHER
            stored[name] = stored.get(name, 0) + n
            if self.on_unknown is not None:
                self.on_unknown(name, n)
            if name not in _warned:
                _warned.add(name)
                _log.warning(
                    "deletions.unknown_resource_type",
                    resource_type=name,
                    entries=n,
                    hint="the deletions feed names a type this client cannot map; its "
                    "entries are skipped (counted in ccsync status); the reconcile still "
                    "removes rows that filter[id] confirms gone",
                )
        self.mirror.meta.set(META_KEY, orjson.dumps(stored).decode())
