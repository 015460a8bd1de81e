"""Copies stamped the very moment of their tombstone: `filter[id]` decides.

A feed entry's tombstone refuses copies stamped before it and yields to copies stamped after
it (`sync.store.deletions`). A copy stamped exactly its moment is no evidence either way: an
upstream whose stamps count whole seconds (the spec fixes no precision) gives a row deleted and
created again within one second the stamp of its deletion, and gives the old row, changed in the
second it was deleted, that stamp too. Refused, the first is a live row lost for good (polls,
the reconcile and the proof all meet the tombstone); taken, the second brings a dead row back.

So the page write leaves such a copy out and notes it (`TypeTable.tombstone_ties`, with the
malls whose listings served it), and this job asks `filter[id]` in those scopes, after the
tombstone was written: a row served is live, written under `TypeTable.vouched` and its tombstone
lifted; a row not served is the dead one, and the tombstone stays. The polls settle what their
cycle noted (`Bodies.poll_all`), the reconcile and the backfill what their run noted. A failure
notes the rows again, for the next run. Cost: one `filter[id]` request per type and scope with
ties (100 ids a request), none otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

from sync.channel.clock import stamp_seconds as seconds
from sync.core.logs import get_logger
from sync.jobs.evidence import Evidence
from sync.model import catalogue


class TombstoneTies:
    """Settles the copies tied with their tombstone (see the module docstring)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.mirror = evidence.mirror
        self.log = get_logger("sync.poll")

    async def settle(self, names: Iterable[str]) -> int:
        """Ask `filter[id]` about the rows of `names` tied with their tombstone since the last
        call; the requests made. A failure notes them again and raises."""
        asked = 0
        for name in names:
            table = self.mirror.table(name)
            ties = table.tombstone_ties()
            if not ties:
                continue
            rtype = catalogue.TYPES[name]
            groups: dict[int | None, list[int]] = {}
            for rid, malls in sorted(ties.items()):
                for mall in self._where(rtype.level, malls):
                    groups.setdefault(mall, []).append(rid)
            dated = table.tombstones(list(ties))  # before the write lifts them
            try:
                with table.vouched(ties):
                    made, served = await self.evidence.fetch_in_malls(rtype, groups)
            except BaseException:
                table.note_ties(ties)  # asked again by the next run
                raise
            asked += made
            self._measure(name, served, dated)
            self.log.info(
                "tombstone.tie_settled",
                type=name,
                served=sorted(served)[:20],
                refused=sorted(set(ties) - served)[:20],
                count=len(ties),
                hint="copies stamped the very moment of their deletion entry: filter[id] "
                "decided (served: created again, tombstone lifted; not served: it holds)",
            )
        return asked

    def _measure(self, name: str, served: set[int], dated: dict[int, str | None]) -> None:
        """Rows found live stamped before their tombstone's moment: the gap measures how far
        the upstream's clocks and precisions put a row from its entry, and the window grows to
        cover it (`TypeTable.widen_window`)."""
        stamps = self.mirror.table(name).stamps(sorted(served & set(dated)))
        gaps = [
            seconds(at) - seconds(stamp)
            for rid, stamp in stamps.items()
            if stamp and (at := dated.get(rid)) and stamp < at
        ]
        if gaps:
            self.mirror.table(name).widen_window(max(gaps))

    def _where(self, level: str, malls: set[int | None]) -> list[int | None]:
        """Where to ask a tied row: a top-level type's scopes (None), else the malls whose
        listings served it, or every mall when no mall's listing did."""
        if level == "top":
            return [None]
        listed = sorted(m for m in malls if m is not None)
        if None not in malls:
            return [*listed]
        return [*self.mirror.table("malls").ids()]
