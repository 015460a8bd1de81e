"""`sync.store.values`: misfit values of a page recorded, counted, and refusals forgotten once clean."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sync.pipeline.batches import Staged
from sync.store.values import ValueNotes


class Book:
    """What `ValueNotes` asks of the bookkeeping, recorded."""

    def __init__(self, refused: dict[str, set[int]]) -> None:
        self.refused = refused
        self.recorded: list[tuple[str, list[Any], list[Any]]] = []
        self.forgotten: list[tuple[str, list[int]]] = []
        self.lookups = 0

    def refused_ids(self) -> dict[str, set[int]]:
        self.lookups += 1
        return {k: set(v) for k, v in self.refused.items()}

    def record_values(self, name: str, refused: Sequence[Any], coerced: Sequence[Any]) -> None:
        self.recorded.append((name, list(refused), list(coerced)))

    def forget_refusals(self, type_name: str, ids: list[int]) -> None:
        self.forgotten.append((type_name, ids))


def test_refused_and_coerced_values_are_recorded_and_counted() -> None:
    book = Book({})
    told: list[tuple[str, str, int]] = []
    notes = ValueNotes(book)  # type: ignore[arg-type]
    notes.on_values = lambda t, outcome, n: told.append((t, outcome, n))
    page = Staged(
        "deals",
        ids=[2],
        refused=[(1, "start_at", "soon", "not a time")],
        coerced=[(2, "views", "7"), (2, "likes", "3")],
    )
    notes.note([page, Staged("images")])
    assert book.recorded == [
        ("deals", [(1, "start_at", "soon", "not a time")], [(2, "views", "7"), (2, "likes", "3")])
    ]
    assert told == [("deals", "refused", 1), ("deals", "coerced", 2)]
    assert book.forgotten == []


def test_a_row_written_cleanly_later_loses_its_refusal() -> None:
    book = Book({"deals": {5, 6}})
    notes = ValueNotes(book)  # type: ignore[arg-type]
    notes.note([Staged("deals", ids=[1, 6])])
    notes.note([Staged("deals", ids=[9], refused=[(7, "end_at", "x", "bad")])])
    notes.note([Staged("deals", ids=[5, 7])])
    assert book.forgotten == [("deals", [6]), ("deals", [5, 7])]
    assert book.lookups == 1  # looked up once, then kept
