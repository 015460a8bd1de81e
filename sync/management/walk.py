"""What one walk of the press release list proves about the ids it did not return (`Walk`).

No I/O: the listing (`sync.management.press`) feeds each page's ids in as they come, and the
store removes only the rows `Walk.proves_absent` (`sync.store.press.PressReleases.prune`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Walk:
    """What one walk of the press release list proves about the ids it did not return.

    The walk asks for ascending ids, so each page is a contiguous slice of the id-ordered list as
    it was when that page was served: an id strictly between two neighbours on one page, below
    the first item of page 1, or above the last item of the last page did not exist then. An id
    between the last item of one page and the first of the next proves nothing: rows removed
    before the second request shift the list left and that id may have been skipped. A page out
    of ascending order, or a page bringing ids below ones already seen, means the upstream did
    not honour the order: then nothing is proven (`ordered` is False). A walk that could not ask
    for the order at all (`by_id` False, see `unsorted`) proves only what a single page holding
    the whole list proves.
    """

    by_id: bool = True  # False: the walk could not ask for an order (`unsorted`)
    ordered: bool = True
    gaps: list[tuple[int | None, int | None]] = field(default_factory=list)
    boundaries: list[tuple[int, int, int]] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)
    _top: int | None = None  # the highest id the walk has seen

    def unsorted(self) -> None:
        """Forget the pages so far: the walk starts again in the upstream's own order.

        That order is unknown (the spec shows none), so neighbours on a page say nothing about
        the ids between them, and a row whose place changes mid-walk can be skipped by every
        page: only a list served whole on one page (first and last at once) proves absence.
        """
        self.by_id, self.ordered = False, True
        self.gaps.clear()
        self.boundaries.clear()
        self._seen.clear()
        self._top = None

    def add(
        self, ids: list[int], *, offset: int, first: bool, last: bool, part_of_walk: bool = True
    ) -> None:
        if not self.by_id:
            if first and last:
                self.gaps.append((None, None))  # the whole list at one instant
            return
        if any(a >= b for a, b in itertools.pairwise(ids)):
            if part_of_walk:
                self.ordered = False
            return
        if part_of_walk:
            fresh = [i for i in ids if i not in self._seen]
            if fresh and self._top is not None and fresh[0] < self._top:
                self.ordered = False
                return
            if ids and self._top is not None and ids[0] > self._top:
                self.boundaries.append((self._top, ids[0], offset))
            self._seen.update(ids)
            if ids:
                self._top = ids[-1] if self._top is None else max(self._top, ids[-1])
        self.gaps.extend(itertools.pairwise(ids))
        if first and ids:
            self.gaps.append((None, ids[0]))
        elif first and last:
            self.gaps.append((None, None))  # an empty list; the store keeps its rows anyway
        if last and ids:
            self.gaps.append((ids[-1], None))

    def add_page(
        self,
        items: list[dict[str, Any]],
        page_no: int,
        per_page: int,
        *,
        last: bool,
        part_of_walk: bool = True,
    ) -> None:
        """`add` the ids of page `page_no` of the list asked `per_page` at a time."""
        self.add(
            [i["id"] for i in items],
            offset=(page_no - 1) * per_page,
            first=page_no == 1,
            last=last,
            part_of_walk=part_of_walk,
        )

    def proves_absent(self, id_: int) -> bool:
        return any((lo is None or lo < id_) and (hi is None or id_ < hi) for lo, hi in self.gaps)

    def boundary_of(self, id_: int) -> int | None:
        """The offset of the page boundary `id_` fell into during the walk, if it did."""
        for lo, hi, offset in self.boundaries:
            if lo < id_ < hi:
                return offset
        return None

    def why_unproven(self) -> str:
        """Why rows the walk did not return may still exist (for the deferral warning)."""
        if not self.by_id:
            return (
                "the upstream refused sort_by[]: in its own order only a list served on one "
                "page proves rows gone"
            )
        if not self.ordered:
            return "listing not in the requested order"
        return "the listing shifted between pages: no page proves these rows gone"
