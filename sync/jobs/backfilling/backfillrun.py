"""A backfill run's bookkeeping: its start (kept across resumes), what it hands on, its report.

A backfill's start is taken once, when a run begins afresh, and kept in `_sync_meta` across
resumes (`backfill_started_at`, on the stamps' scale as the client knew it then, and
`STARTED_LOCAL`, the local Unix time). Two things are measured from it: the scopes' incremental
cursors and the deletions feed's (`cursor_start`: the daemon re-reads everything that changed
while the backfill ran) and the missed-row signal "a row changed since the start"
(`sync.jobs.backfilling.changedsince`). Both use the stamps' *lower bound* of that moment
(`sync.channel.clock`): early is the safe direction for both. What a run did, per type, is
its `BackfillReport`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sync.channel.clock import UpstreamClock
from sync.core.config import Settings
from sync.model.stamps import iso_ms
from sync.store import MirrorStore

#: `_sync_meta` key: the backfill's start on the stamps' scale, as the client knew it then.
STARTED_AT = "backfill_started_at"
#: `_sync_meta` key: the local Unix time the running backfill first started (`cursor_start`).
STARTED_LOCAL = "backfill_started_local"
#: `_sync_meta` key: the types the mirror held rows of when the backfill started (comma list).
PREFILLED = "backfill_prefilled"


@dataclass
class TypeReport:
    """What the backfill did for one type."""

    rows: int = 0
    pages: int = 0
    #: Pages an interrupted run had committed, which this one resumed after.
    resumed: int = 0
    repaired: int = 0
    removed: int = 0
    error: str | None = None
    #: Malls whose listing still changed under the last missed-row pass allowed: rows of them
    #: may be missing (`ccsync backfill` then exits 1).
    unsettled: list[int] = field(default_factory=list)


@dataclass
class BackfillReport:
    """What one `ccsync backfill` run did, per type."""

    types: dict[str, TypeReport] = field(default_factory=dict)
    started_at: str = ""
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.types.values())


class Started(Protocol):
    """What a backfill's start asks of the upstream client (`ChannelClient`, or a test's
    fake): a login, and "now" on the stamps' scale."""

    clock: UpstreamClock

    async def log_in(self, *, every: bool = False) -> int: ...


async def begin(
    client: Started,
    mirror: MirrorStore,
    settings: Settings,
    *,
    restart: bool,
    clock: Callable[[], float],
) -> str:
    """The start of this backfill: an interrupted one's, kept across resumes, or a new one,
    which forgets the last one's checkpoints (never which types were completed,
    `Mirror.backfills.completed_types`) only once the upstream answered a login: one refused at login,
    or unreachable, leaves the mirror as it was."""
    started_at = mirror.meta.get(STARTED_AT)
    if not restart and started_at is not None:
        return started_at
    await client.log_in()
    mirror.meta.set(STARTED_LOCAL, f"{clock():.3f}")
    started_at = client.clock.now()
    prefilled = [t.name for t in settings.upstream.mirrored_types() if mirror.table(t.name).count()]
    mirror.backfills.reset()
    mirror.meta.set(PREFILLED, ",".join(prefilled))
    mirror.meta.set(STARTED_AT, started_at)
    return started_at


def finish(mirror: MirrorStore) -> None:
    """A finished backfill: the next one starts afresh (the cursors carry this one's start)."""
    mirror.meta.set(STARTED_AT, None)
    mirror.meta.set(STARTED_LOCAL, None)


def cursor_start(client: Started, mirror: MirrorStore, started_at: str) -> str:
    """The cursors a finished scope gets: the local moment the backfill first started, on the
    stamps' scale as the client knows it *now* (`sync.channel.clock`): the offset learned by
    the end is the best one, and still a lower bound of the stamps' "now" at the start, so the
    daemon re-reads everything that changed meanwhile. `started_at` while no stamp was seen,
    or for a run started by a version that kept no local start."""
    local = mirror.meta.get(STARTED_LOCAL)
    if not local or client.clock.offset is None:
        return started_at
    try:
        return iso_ms(client.clock.at(float(local)))
    except ValueError:
        return started_at
