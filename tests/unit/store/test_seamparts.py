"""`sync.store.seamparts`: each part an open SQLite mirror holds is its protocol, and so is each
PostgreSQL part written so far.

`PARTS` pairs each of `Mirror`'s attributes with its protocol and SQLite class; what the parts
open (the queue, the proof's listing, the press releases) is held likewise. At runtime: an
instance check and each method's parameters against the protocol's (`tests.support.protocols`);
at type level: `_as_the_core_holds_them`, never called, checked by mypy strict
(`tests/unit/store/test_seam.py`). The PostgreSQL classes are checked by class, no server needed.
"""

from __future__ import annotations

import pytest

from sync.store import Mirror
from sync.store.backfills import Backfills
from sync.store.changes import ChangeFeed
from sync.store.faults import StorageCheck
from sync.store.groupcommit import GroupCommit
from sync.store.hours import Hours
from sync.store.indexes import EndPhase
from sync.store.jobrecords import JobRecords
from sync.store.malls import Malls
from sync.store.meta import Cursors, Meta
from sync.store.pg import backfills as pg_backfills
from sync.store.pg import bookkeeping
from sync.store.pg import changes as pg_changes
from sync.store.pg import hours as pg_hours
from sync.store.pg import malls as pg_malls
from sync.store.pg import press as pg_press
from sync.store.pg import proof as pg_proof
from sync.store.pg import queue as pg_queue
from sync.store.pg import status as pg_status
from sync.store.pg.values import PgValues
from sync.store.press import PressReleases, PressTables
from sync.store.proof import ProofBook, ProofRecords
from sync.store.queue import ChangeQueue, QueueTable
from sync.store.runs import Runs
from sync.store.schema import Schema
from sync.store.seamparts import (
    BackfillsPart,
    ChangeFeedPart,
    ChangeQueuePart,
    CursorsPart,
    GroupPart,
    HoursPart,
    IndexesPart,
    JobsPart,
    MallsPart,
    MetaPart,
    PressPart,
    PressReleasesPart,
    ProofBookPart,
    ProofPart,
    QueuePart,
    RunsPart,
    SchemaPart,
    StoragePart,
    TypesPart,
    ValuesPart,
)
from sync.store.status import TypeStatuses
from sync.store.values import ValueNotes
from tests.support.protocols import mismatches

#: `Mirror`'s attribute -> (its protocol, its SQLite class).
PARTS: dict[str, tuple[type, type]] = {
    "meta": (MetaPart, Meta),
    "cursors": (CursorsPart, Cursors),
    "backfills": (BackfillsPart, Backfills),
    "runs": (RunsPart, Runs),
    "jobs": (JobsPart, JobRecords),
    "types": (TypesPart, TypeStatuses),
    "values": (ValuesPart, ValueNotes),
    "changes": (ChangeFeedPart, ChangeFeed),
    "group": (GroupPart, GroupCommit),
    "indexes": (IndexesPart, EndPhase),
    "hours": (HoursPart, Hours),
    "malls": (MallsPart, Malls),
    "proof": (ProofPart, ProofRecords),
    "queue": (QueuePart, QueueTable),
    "press": (PressPart, PressTables),
    "storage": (StoragePart, StorageCheck),
    "schema": (SchemaPart, Schema),
}

#: The PostgreSQL parts written so far (`sync.store.pg`), each with its protocol.
POSTGRES: list[tuple[type, type]] = [
    (MetaPart, bookkeeping.Meta),
    (CursorsPart, bookkeeping.Cursors),
    (RunsPart, bookkeeping.Runs),
    (JobsPart, bookkeeping.JobRecords),
    (ChangeFeedPart, pg_changes.ChangeFeed),
    (BackfillsPart, pg_backfills.Backfills),
    (TypesPart, pg_status.TypeStatuses),
    (QueuePart, pg_queue.QueueTable),
    (ChangeQueuePart, pg_queue.ChangeQueue),
    (ProofPart, pg_proof.ProofRecords),
    (ProofBookPart, pg_proof.ProofBook),
    (PressPart, pg_press.PressTables),
    (PressReleasesPart, pg_press.PressReleases),
    (HoursPart, pg_hours.Hours),
    (MallsPart, pg_malls.Malls),
]


def _as_the_core_holds_them(
    mirror: Mirror,
    queue: ChangeQueue,
    book: ProofBook,
    press: PressReleases,
    pg_meta: bookkeeping.Meta,
    pg_cursors: bookkeeping.Cursors,
    pg_runs: bookkeeping.Runs,
    pg_jobs: bookkeeping.JobRecords,
    pg_feed: pg_changes.ChangeFeed,
    pg_checkpoints: pg_backfills.Backfills,
    pg_types: pg_status.TypeStatuses,
    pg_values: PgValues,
    pg_queue_table: pg_queue.QueueTable,
    pg_queue_opened: pg_queue.ChangeQueue,
    pg_proof_records: pg_proof.ProofRecords,
    pg_book: pg_proof.ProofBook,
    pg_press_tables: pg_press.PressTables,
    pg_press_opened: pg_press.PressReleases,
    pg_hours_part: pg_hours.Hours,
    pg_malls_part: pg_malls.Malls,
) -> list[object]:
    """Never called: mypy checks that each is its protocol (`tests/unit/store/test_seam.py`)."""
    m = mirror
    sqlite: tuple[MetaPart, CursorsPart, BackfillsPart, RunsPart, JobsPart, TypesPart] = (
        m.meta,
        m.cursors,
        m.backfills,
        m.runs,
        m.jobs,
        m.types,
    )
    more: tuple[ValuesPart, ChangeFeedPart, GroupPart, IndexesPart, HoursPart, MallsPart] = (
        m.values,
        m.changes,
        m.group,
        m.indexes,
        m.hours,
        m.malls,
    )
    rest: tuple[ProofPart, QueuePart, PressPart, StoragePart, SchemaPart] = (
        m.proof,
        m.queue,
        m.press,
        m.storage,
        m.schema,
    )
    opened: tuple[ChangeQueuePart, ProofBookPart, PressReleasesPart] = (queue, book, press)
    pg: tuple[MetaPart, CursorsPart, RunsPart, JobsPart, ChangeFeedPart] = (
        pg_meta,
        pg_cursors,
        pg_runs,
        pg_jobs,
        pg_feed,
    )
    pg_more: tuple[BackfillsPart, TypesPart, ValuesPart] = (
        pg_checkpoints,
        pg_types,
        ValueNotes(pg_values),
    )
    pg_daemon: tuple[QueuePart, ProofPart, PressPart, HoursPart, MallsPart] = (
        pg_queue_table,
        pg_proof_records,
        pg_press_tables,
        pg_hours_part,
        pg_malls_part,
    )
    pg_opened: tuple[ChangeQueuePart, ProofBookPart, PressReleasesPart] = (
        pg_queue_opened,
        pg_book,
        pg_press_opened,
    )
    return [sqlite, more, rest, opened, pg, pg_more, pg_daemon, pg_opened]


@pytest.mark.parametrize("name", sorted(PARTS))
def test_each_part_of_an_open_mirror_is_its_protocol(mirror: Mirror, name: str) -> None:
    proto, cls = PARTS[name]
    part = getattr(mirror, name)
    assert type(part) is cls
    assert isinstance(part, proto)
    assert mismatches(proto, part) == []


def test_what_the_parts_open_is_its_protocol_too(mirror: Mirror) -> None:
    """The queue (the daemon's), the proof's listing and the press releases' writes."""
    opened = [
        (ChangeQueuePart, mirror.queue.open()),
        (ProofBookPart, mirror.proof.book()),
        (PressReleasesPart, mirror.press.open()),
    ]
    for proto, part in opened:
        assert isinstance(part, proto)
        assert mismatches(proto, part) == []


def test_a_value_note_s_hook_is_settable_through_its_protocol(mirror: Mirror) -> None:
    """`on_values` is the one attribute the core sets (the daemon's metrics)."""
    told: list[tuple[str, str, int]] = []
    values: ValuesPart = mirror.values
    values.on_values = lambda t, outcome, n: told.append((t, outcome, n))
    assert mirror.values.on_values is not None


@pytest.mark.parametrize(("proto", "cls"), POSTGRES, ids=lambda x: x.__qualname__)
def test_the_postgresql_parts_written_so_far_are_their_protocols(proto: type, cls: type) -> None:
    assert issubclass(cls, proto)
    assert mismatches(proto, cls) == []
