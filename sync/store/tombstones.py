"""Versioned tombstones: when a deleted id refuses a copy, and when a copy outlives the deletion.

A tombstone (`_sync_tombstones`: type, id, deleted_at) is written with every deletion the
mirror applies, at the moment of the deletion: the deletions feed entry's `created_at`, else the
upstream's time when `filter[id]` confirmed the row gone. It exists for one race: a page fetched
before the deletion and written after it must not bring the row back. The spec never says ids
are not reused, so a copy created or updated after the deletion wins (the writer then lifts the
tombstone): a re-created row reaches the mirror.
"""

from __future__ import annotations

from typing import Any

from sync.model.stamps import shift

#: How long a tombstone of a row without `updated_at` (tags, groups) refuses copies: those
#: carry no stamp to compare with the deletion's, so a copy is taken for a page fetched before
#: the deletion only within this window, and for a re-created row after it.
STAMPLESS_TOMBSTONE_SECONDS = 600.0


def tombstone_holds(deleted_at: str | None, stamp: Any, now: str) -> bool:
    """Whether a tombstone of `deleted_at` refuses a copy stamped `stamp` (normalised
    `updated_at`, or None for a type without one) at local time `now`."""
    if deleted_at is None:
        return True  # a tombstone from before versions: as before, it holds
    if isinstance(stamp, str):
        return stamp <= deleted_at
    return shift(deleted_at, STAMPLESS_TOMBSTONE_SECONDS) > now
