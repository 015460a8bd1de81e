"""A page as staged: the rows of each type, ready for the mirror's set-based page write.

`Staged` is one type's part of a page, `StagedPage` a whole listing page; both are plain values
(picklable, and sent across the page worker's pipe as tuples, `sync.pipeline.pageworker.to_wire`),
built by `sync.pipeline.staging`, trimmed by the memo of written rows (`sync.pipeline.seen`) and
written by the store (`Mirror.write_staged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.linkage import Links


@dataclass
class Staged:
    """One type's part of a page, ready for the set-based upsert.

    `rows[i]` is `(ids[i], *values)` in the order of `columns`; a resource without one of the
    batch's attributes has NULL there. `samples` holds the first non-null value of every
    column (a new column takes its SQLite type from it); `versions` is filled for included
    resources, so the writer can skip a copy identical to the one it last committed.
    """

    type: str
    ids: list[int] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    samples: dict[str, Any] = field(default_factory=dict)
    links: Links = field(default_factory=dict)
    versions: list[object] | None = None
    dropped: int = 0
    #: Resources left out because a value does not fit its declared type or a stamp cannot be
    #: read (the mirror keeps its last good copy): (id, attribute, value clipped, problem).
    refused: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: Values converted losslessly to their declared type (`"7"` for an integer): (id,
    #: attribute, value as sent, clipped).
    coerced: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def rtype(self) -> ResourceType:
        return catalogue.TYPES[self.type]

    def keep(self, wanted: Sequence[bool]) -> None:
        """Keep only the rows whose flag is true (ids, rows, versions and links alike)."""
        gone = {i for i, w in zip(self.ids, wanted, strict=True) if not w}
        if not gone:
            return
        self.rows = [r for r, w in zip(self.rows, wanted, strict=True) if w]
        if self.versions is not None:
            self.versions = [v for v, w in zip(self.versions, wanted, strict=True) if w]
        self.ids = [i for i, w in zip(self.ids, wanted, strict=True) if w]
        self.links = {
            n: [(o, r) for o, r in pairs if o not in gone] for n, pairs in self.links.items()
        }


@dataclass
class StagedPage:
    """A listing page, staged: the listed type's batch first, then one per included type."""

    batches: list[Staged]
    resources: int  # resources in `data`, before any was skipped
    number: int
    last: int
    #: `meta.scripts` as served (None: no such key); the mirror checks it (`sync.store.scripts`).
    scripts: Any = None
    ticket: int = 0  # the worker's number for this page (`Sent`); 0 when staged in-process

    @property
    def rows(self) -> int:
        """`resources`, as the stop rule reads a page (`sync.channel.paging.Paged`)."""
        return self.resources

    @property
    def not_modified(self) -> bool:
        """Never: a backfill asks no conditional request (`sync.channel.paging.Paged`)."""
        return False

    def digest(self) -> int:
        """What the page holds, as the progress rule compares pages
        (`sync.channel.paging.Paging.walk`): the listed rows' ids and `updated_at`."""
        listed = self.batches[0] if self.batches else None
        if listed is None:
            return hash(())
        i = listed.columns.index("updated_at") + 1 if "updated_at" in listed.columns else 0
        return hash(tuple((r[0], r[i]) for r in listed.rows))

    def newest(self) -> str | None:
        """The largest `updated_at` of the listed rows (normalised on staging), or None: one
        max over the page, what the upstream clock learns from (`sync.channel.clock`)."""
        listed = self.batches[0] if self.batches else None
        if listed is None or "updated_at" not in listed.columns:
            return None
        i = listed.columns.index("updated_at") + 1  # the id comes first
        return max((r[i] for r in listed.rows if type(r[i]) is str), default=None)
