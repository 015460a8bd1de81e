"""The webhook queue's backlog as `ccsync status` shows it: how many `filter[id]` requests the
waiting notices need and how long they take at the request budget (#50), from the lanes
`sync.store.queue.lanes` counts. Pure arithmetic, apart from the mirror it is read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sync.store import queue


def queue_drain(
    lanes: list[int], page_size: Mapping[str, int | None] | None, rate: float | None
) -> dict[str, Any]:
    """What the waiting notices cost: each lane's ids are asked `queue.TAKE_IDS` at a time, or
    fewer when the upstream serves smaller pages (`page_size`: `{"asked", "served"}`); at
    `rate` requests a second. A lower bound: a mall-scoped id the mirror does not hold yet is
    looked for in its malls, one request each."""
    served = (page_size or {}).get("served")
    per = min(queue.TAKE_IDS, served) if served else queue.TAKE_IDS
    requests = sum(-(-n // per) for n in lanes)
    drain = round(requests / rate, 1) if rate else None
    return {"queue_requests": requests, "queue_ids_per_request": per, "queue_drain_s": drain}


def queue_line(data: dict[str, Any]) -> str:
    """The queue's depth and, when it holds notices, the time to drain it at the budget."""
    depth = data["queue_depth"]
    line = f"queue: {depth:,} notice{'' if depth == 1 else 's'} waiting"
    requests = data.get("queue_requests")
    if not data["queue_depth"] or not requests:
        return line
    per = data.get("queue_ids_per_request")
    cost = f"{requests:,} filter[id] request{'' if requests == 1 else 's'} of up to {per} ids"
    drain = data.get("queue_drain_s")
    if drain is None:
        return f"{line} ({cost}; no request budget to time them by)"
    return f"{line} ({cost}: about {_duration(drain)} at the request budget)"


def _duration(seconds: float) -> str:
    """`42 s`, `18 min`, `3.5 h`."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
