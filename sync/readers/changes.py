"""The mirror's change feed, read in order: what `ccsync changes` prints, once or following.

A website invalidates its caches from it; a downstream system follows the mirror from the last
sequence number it saw, of every type or of some. Retention (`changes_retention_days`) drops
old entries: a reader that asks from before the last one dropped gets a `pruned` entry first,
so it knows to re-read the mirror instead of missing changes without a word. The feed itself
(its table, triggers and pruning) lives in the store; this module only reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

from sync.store import MirrorStore
from sync.store.changes import Change

#: Entries read per query while catching up.
BATCH = 1000


def changes(
    mirror: MirrorStore,
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
        pruned = mirror.changes.pruned_through()
        if since < pruned:
            yield Change(pruned, "*", None, "pruned", None, None)
            since = pruned
        # Up to the newest entry now: a filtered reader moves past the other types' entries
        # without reading them again, and misses none written while it reads.
        top = mirror.changes.last()
        batch = mirror.changes.since(since, BATCH, types=types, upto=top)
        yield from batch
        if len(batch) == BATCH:
            since = batch[-1].seq
            continue
        since = max(since, top)
        if not follow:
            return
        sleep(interval)
