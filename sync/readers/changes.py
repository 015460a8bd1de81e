"""The mirror's change feed, read in order: what `ccsync changes` prints, once or following.

A website invalidates its caches from it; a downstream system follows the mirror from the last
sequence number it saw. Each entry is a line `SEQ TYPE ID OP UPDATED_AT` or a JSON object.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

from sync.store import Mirror

#: One entry of the feed: (seq, type, id, op, updated_at, at), as `Mirror.changes` gives it.
Change = tuple[int, str, int | None, str, str | None, str]


def changes(
    mirror: Mirror,
    since: int,
    *,
    follow: bool = False,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Change]:
    """Entries after `since`, in order; with `follow`, new ones as they come (looked for every
    `interval` seconds while none is waiting), until the caller stops."""
    while True:
        batch = mirror.changes(since)
        for entry in batch:
            yield entry
            since = entry[0]
        if not follow:
            return
        if not batch:
            sleep(interval)


def change_line(entry: Change, *, as_json: bool = False) -> str:
    """One entry as printed: tab-separated `SEQ TYPE ID OP UPDATED_AT`, or one JSON object."""
    seq, type_name, rid, op, stamp, at = entry
    if as_json:
        return json.dumps(
            {"seq": seq, "type": type_name, "id": rid, "op": op, "updated_at": stamp, "at": at}
        )
    return f"{seq}\t{type_name}\t{'' if rid is None else rid}\t{op}\t{stamp or ''}"
