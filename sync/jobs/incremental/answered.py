"""Notices a poll answered: one fetch per change, whichever lane reads the row first (#47).

A poll page and the queue's `filter[id]` batches often cover the same rows (a burst of update
notices for rows the next poll also walks): each would spend a request on the same versions.
When a poll page is written, the update notices waiting for its rows that were received before
the page was asked for (`Page.asked_at`) are answered by it, and leave the queue
(`ChangeQueue.answered`) without a request of their own. The rule, and why it loses nothing:

- the change a notice announces was made before the notice was received, so a request asked
  after that holds it or a newer version (a later change has a notice of its own, received
  after the ask, which stays); what the worker's own fetch would read is no newer than that
  but by such later changes;
- only rows the mirror holds afterwards at the version served or newer count (a copy refused
  for a tombstone or a value it cannot take leaves its notice to the worker);
- a notice received at the ask or after it stays (the times are this machine's clock at
  millisecond grain, compared strictly), and a notice the worker has taken stays its own;
- deletion notices stay: a mall's listing serving a row says nothing of its other malls.

The ask is timed before the request waits for the budget or is sent, so the mark is never
later than the request. The poll gains nothing from the reverse (skipping rows the queue
holds): a listing page costs the same request whatever it serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sync.channel.pages import Page
from sync.model.stamps import normalize_or_none
from sync.pipeline.encoding import id_or_none


class WaitingNotices(Protocol):
    """What a poll asks of the durable queue (`sync.store.queue.ChangeQueue`)."""

    def answered(self, type_name: str, ids: Sequence[int], asked_at: str) -> int: ...


def held_as_served(page: Page, held: Mapping[int, str | None]) -> list[int]:
    """The rows of `page` the mirror holds (`held`: their stamps after the write) at the
    version served or newer; a row served without a stamp is none of them."""
    out = []
    for r in page.resources:
        rid = id_or_none(r.get("id"))
        served = normalize_or_none((r.get("attributes") or {}).get("updated_at"))
        if rid is None or served is None:
            continue
        have = held.get(rid)
        if have is not None and have >= served:
            out.append(rid)
    return out


def answer_notices(
    notices: WaitingNotices | None, type_name: str, page: Page, held: Mapping[int, str | None]
) -> int:
    """Remove the update notices `page` answered (module docstring); how many went. Nothing
    without a queue or a page that does not say when it was asked."""
    if notices is None or page.asked_at is None or not page.resources:
        return 0
    ids = held_as_served(page, held)
    return notices.answered(type_name, ids, page.asked_at) if ids else 0
