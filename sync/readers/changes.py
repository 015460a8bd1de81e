"""The change feed as a reader follows it (`ccsync changes`): entries after a sequence number,
filtered by type, and a `pruned` entry first whenever retention dropped some the reader has not
seen, so that no reader loses a change without being told.

The feed itself (its table, triggers and pruning) lives in the store; this module only reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sync.store import Mirror

#: Entries read per query while catching up.
BATCH = 1000


@dataclass(frozen=True)
class Entry:
    """One change: `op` is upsert, delete, repair, links or backfill, or `pruned` (entries up
    to `seq` were dropped by retention before this reader saw them; `type` is `*`)."""

    seq: int
    type: str
    id: int | None
    op: str
    updated_at: str | None
    at: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """SEQ TYPE ID OP UPDATED_AT, tab-separated (empty for a missing id or stamp)."""
        rid = "" if self.id is None else str(self.id)
        return f"{self.seq}\t{self.type}\t{rid}\t{self.op}\t{self.updated_at or ''}"


def follow_changes(
    path: Path,
    since: int = 0,
    types: Sequence[str] = (),
    *,
    follow: bool = False,
    interval: float = 1.0,
) -> Iterator[Entry]:
    """Entries after `since` (of `types`, or all), oldest first; with `follow`, forever, looking
    every `interval` seconds once caught up. Reads the mirror file alone (read-only)."""
    mirror = Mirror.open(path, readonly=True)
    try:
        while True:
            pruned = mirror.pruned_through()
            if since < pruned:
                yield Entry(pruned, "*", None, "pruned", None, None)
                since = pruned
            # Up to the newest entry now: a filtered reader moves past the others' entries
            # without reading them again, and misses none written while it reads.
            top = mirror.last_change()
            batch = mirror.changes(since, BATCH, types=types, upto=top)
            for seq, type_name, rid, op, stamp, at in batch:
                yield Entry(seq, type_name, rid, op, stamp, at)
            if len(batch) == BATCH:
                since = batch[-1][0]
                continue
            since = max(since, top)
            if not follow:
                return
            time.sleep(interval)
    finally:
        mirror.close()
