"""A mall's hours as served (`/malls/{id}/hours`) turned into the rows of the `hours` table.

Hours are not JSON:API resources of a listed type: each item is one day, keyed by its `date`
(else its `id`), and its attributes become the columns as they come (values encoded as the
mirror stores them, `staging.encode`). The store binds these rows (`Mirror.hours.write`); like
every other page, they are staged here, never in the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sync.model.stamps import now_iso
from sync.pipeline.encoding import encode

#: One row of `hours`: `mall_id`, `date`, `fetched_at` and the day's attributes.
HoursRow = dict[str, Any]


def stage_hours(mall_id: int, items: Sequence[dict[str, Any]]) -> list[HoursRow]:
    """The rows of one mall's hours items (an item without a date is left out), all stamped
    `fetched_at` now."""
    rows = []
    stamp = now_iso()
    for item in items:
        attrs = dict(item.get("attributes") or {})
        day = str(attrs.get("date") or item.get("id") or "")
        if not day:
            continue
        row = {k: encode(v) for k, v in attrs.items() if k not in ("mall_id", "fetched_at")}
        row.update({"mall_id": mall_id, "date": day, "fetched_at": stamp})
        rows.append(row)
    return rows
