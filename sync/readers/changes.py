"""The mirror's change feed, read in order: what `ccsync changes` prints, once or following.

A website invalidates its caches from it; a downstream system follows the mirror from the last
sequence number it saw, of every type or of some. Retention (`changes_retention_days`) drops
old entries: a reader that asks from before the last one dropped gets a `pruned` entry first,
so it knows to re-read the mirror instead of missing changes without a word. The feed itself
(its table, triggers and pruning) lives in the store; this module only reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sync.store import Mirror

#: Entries read per query while catching up.
BATCH = 1000


@dataclass(frozen=True)
class Change:
    """One entry: `op` is upsert, delete, repair, links or backfill; or `pruned` (entries up to
    `seq` were dropped by retention before this reader saw them; `type` is `*`)."""

    seq: int
    type: str
    id: int | None
    op: str
    updated_at: str | None
    at: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self, *, as_json: bool = False) -> str:
        """As printed: tab-separated `SEQ TYPE ID OP UPDATED_AT`, or one JSON object."""
        if as_json:
            return json.dumps(self.as_dict())
        rid = "" if self.id is None else str(self.id)
        return f"{self.seq}\t{self.type}\t{rid}\t{self.op}\t{self.updated_at or ''}"


def changes(
    mirror: Mirror,
    since: int,
    types: Sequence[str] = (),
    *,
    follow: bool = False,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Change]:
    """Entries after `since` (of `types`, or all), in order; with `follow`, new ones as they
    come (looked for every `interval` seconds once caught up), until the caller stops."""
    while True:
        pruned = mirror.pruned_through()
        if since < pruned:
            yield Change(pruned, "*", None, "pruned", None, None)
            since = pruned
        # Up to the newest entry now: a filtered reader moves past the other types' entries
        # without reading them again, and misses none written while it reads.
        top = mirror.last_change()
        batch = mirror.changes(since, BATCH, types=types, upto=top)
        for entry in batch:
            yield Change(*entry)
        if len(batch) == BATCH:
            since = batch[-1][0]
            continue
        since = max(since, top)
        if not follow:
            return
        sleep(interval)
