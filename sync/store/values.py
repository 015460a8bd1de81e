"""Misfit values of a page: refused and coerced values logged, recorded and counted.

Staging (`sync.pipeline.staging`) leaves out a row whose value does not fit its declared type
(the mirror keeps its last good copy) and converts a value that fits losslessly. Inside the
page's transaction, the writer logs each, records them in `_sync_refusals` and `_sync_coercions`
(shown by `ccsync status`: `ValueNotes.faults`), tells the daemon's metrics (`on_values`), and
forgets the refusals of rows a later page writes cleanly. The mirror holds one `ValueNotes`
(`Mirror.values`).

What is noted, logged, told and forgotten is written once, in `ValueNotes`, which holds a
store's statements (`ValueBook`): `SqliteValues` here, `sync.store.pg.values.PgValues` in the
PostgreSQL mirror.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sync.core.logs import get_logger
from sync.core.redact import redact_text
from sync.model.stamps import now_iso
from sync.pipeline.batches import Staged

_log = get_logger("sync.store")

#: Told (type, "refused" or "coerced", how many) of each page's misfit values.
OnValues = Callable[[str, str, int], None]

#: The columns of a fault's last refused value (`ValueNotes.faults`), as `last_refused` names
#: them.
LAST_REFUSED = ("id", "attribute", "value", "problem")

#: A row of `_sync_refusals` as first noted: type, id, attribute, value (redacted), problem,
#: first and last noted.
Refusal = tuple[str, int, str, str, str, str, str]
#: A count of `_sync_coercions` to add: type, attribute, how many, the last one's id and value
#: (redacted), when.
Coercion = tuple[str, str, int, int, str, str]
#: Per type, the refusals held: type, how many, their latest `last_at`, and the last one's
#: `LAST_REFUSED` values.
Refused = tuple[str, int, str | None, Any]
#: Per type, the coercions counted: type, their sum.
Coerced = tuple[str, Any]


def refusal_rows(
    type_name: str, refused: Sequence[tuple[int, str, str, str]], now: str
) -> list[Refusal]:
    """`_sync_refusals` rows of a batch's refused values, in the batch's order."""
    return [(type_name, rid, a, redact_text(v), p, now, now) for rid, a, v, p in refused]


def coercion_rows(
    type_name: str, coerced: Sequence[tuple[int, str, str]], now: str
) -> list[Coercion]:
    """`_sync_coercions` counts of a batch's coerced values, one per attribute in the order
    first met."""
    per: dict[str, list[tuple[int, str]]] = {}
    for rid, attribute, value in coerced:
        per.setdefault(attribute, []).append((rid, value))
    return [
        (type_name, a, len(items), items[-1][0], redact_text(items[-1][1]), now)
        for a, items in per.items()
    ]


def faults_of(refused: Sequence[Refused], coerced: Sequence[Coerced]) -> dict[str, dict[str, Any]]:
    """`ValueNotes.faults` from what a store holds (`ValueBook.misfits`)."""
    out: dict[str, dict[str, Any]] = {}
    for t, n, last_at, last in refused:
        out.setdefault(t, {"refused": 0, "coerced": 0})
        out[t]["refused"] = int(n)
        out[t]["last_refused"] = dict(zip(LAST_REFUSED, last, strict=True), at=last_at)
    for t, n in coerced:
        out.setdefault(t, {"refused": 0, "coerced": 0})["coerced"] = int(n)
    return out


class ValueBook(Protocol):
    """What a store gives the notes (`ValueNotes`): its statements on `_sync_refusals` and
    `_sync_coercions`. `SqliteValues` below, `sync.store.pg.values.PgValues` in the PostgreSQL
    mirror: the notes hold one of them (composition), so one rule holds in both."""

    def record(self, refusals: Sequence[Refusal], coercions: Sequence[Coercion]) -> None:
        """Keep each refusal (one row per type, id and attribute: one noted again takes the
        new value, problem and `last_at`, its `times` counted up) and add each coercion to its
        (type, attribute)'s `count`, the last id, value and moment replaced; row by row, in
        order."""
        ...

    def held(self) -> dict[str, set[int]]:
        """The ids of rows `_sync_refusals` holds, per type (few: rows with a misfit value)."""
        ...

    def forget(self, type_name: str, ids: Sequence[int]) -> None:
        """Delete the refusals of `ids` of `type_name` (rows being written well)."""
        ...

    def misfits(self) -> tuple[list[Refused], list[Coerced]] | None:
        """Per type, types ascending: the refusals held (`Refused`; the last one is the latest
        by `last_at`, then the highest id, then the first attribute in byte order) and the
        coercions counted (`Coerced`). None: the tables do not exist (a mirror written before
        them, opened read-only)."""
        ...


class ValueNotes:
    """What this process knows of misfit values: refused ids per type, coercions logged; the
    statements that keep them are the `book`'s (`ValueBook`)."""

    def __init__(self, book: ValueBook) -> None:
        self.book = book
        #: Ids per type that `_sync_refusals` holds or held (None until looked up; never
        #: shrunk, so a rolled-back page cannot make it forget one).
        self._refused_ids: dict[str, set[int]] | None = None
        #: (type, attribute) pairs whose coercions this process has logged at info level.
        self._coercions_logged: set[tuple[str, str]] = set()
        self.on_values: OnValues | None = None

    def note(self, batches: Sequence[Staged]) -> None:
        """Log, record and count the batches' refused and coerced values, and forget the
        refusals of rows written now."""
        for b in batches:
            for rid, attribute, value, problem in b.refused:
                _log.error(
                    "mirror.value_refused",
                    type=b.type,
                    id=rid,
                    attribute=attribute,
                    value=value,
                    problem=problem,
                    fix="the row keeps its last good copy; report the value to the upstream",
                )
            self._log_coerced(b)
            if self._refused_ids is None:
                self._refused_ids = self.book.held()
            if b.refused or b.coerced:
                now = now_iso()
                self.book.record(
                    refusal_rows(b.type, b.refused, now), coercion_rows(b.type, b.coerced, now)
                )
                self._refused_ids.setdefault(b.type, set()).update(r[0] for r in b.refused)
                if self.on_values is not None:
                    for outcome, n in (("refused", len(b.refused)), ("coerced", len(b.coerced))):
                        if n:
                            self.on_values(b.type, outcome, n)
            held = self._refused_ids.get(b.type)
            if held and b.ids:  # a set intersection a page: nothing to do on a clean mirror
                again = held.intersection(b.ids)
                if again:
                    self.book.forget(b.type, sorted(again))

    def _log_coerced(self, b: Staged) -> None:
        """One line per attribute: at info the first time, then at debug (a systematic misfit
        would otherwise log on every page)."""
        per: dict[str, list[tuple[int, str, str]]] = {}
        for item in b.coerced:
            per.setdefault(item[1], []).append(item)
        for attribute, items in sorted(per.items()):
            first = (b.type, attribute) not in self._coercions_logged
            self._coercions_logged.add((b.type, attribute))
            (_log.info if first else _log.debug)(
                "mirror.values_coerced",
                type=b.type,
                attribute=attribute,
                count=len(items),
                id=items[0][0],
                value=items[0][2],
                hint="converted losslessly to the declared type; counted in ccsync status",
            )

    def faults(self) -> dict[str, dict[str, Any]]:
        """Per type: values refused (rows held at their last good copy) and the last one, and
        values coerced; for `ccsync status`. Empty for a mirror written before these existed."""
        found = self.book.misfits()
        return {} if found is None else faults_of(*found)


class SqliteValues:
    """`ValueBook` in the SQLite mirror."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def record(self, refusals: Sequence[Refusal], coercions: Sequence[Coercion]) -> None:
        self.conn.executemany(
            "INSERT INTO _sync_refusals (type, id, attribute, value, problem, first_at, last_at, "
            "times) VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT(type, id, attribute) DO UPDATE "
            "SET value = excluded.value, problem = excluded.problem, last_at = excluded.last_at, "
            "times = times + 1",
            refusals,
        )
        self.conn.executemany(
            "INSERT INTO _sync_coercions (type, attribute, count, last_id, last_value, last_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(type, attribute) DO UPDATE SET "
            "count = count + excluded.count, last_id = excluded.last_id, "
            "last_value = excluded.last_value, last_at = excluded.last_at",
            coercions,
        )

    def held(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for t, rid in self.conn.execute("SELECT DISTINCT type, id FROM _sync_refusals"):
            out.setdefault(t, set()).add(int(rid))
        return out

    def forget(self, type_name: str, ids: Sequence[int]) -> None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            self.conn.execute(
                f"DELETE FROM _sync_refusals WHERE type = ? AND id IN ({','.join('?' * len(chunk))})",
                (type_name, *chunk),
            )

    def misfits(self) -> tuple[list[Refused], list[Coerced]] | None:
        try:
            refused = self.conn.execute(
                "SELECT type, count(*), max(last_at) FROM _sync_refusals GROUP BY type"
            ).fetchall()
            coerced = self.conn.execute(
                "SELECT type, sum(count) FROM _sync_coercions GROUP BY type"
            ).fetchall()
        except sqlite3.OperationalError:  # read-only open of a mirror without the tables
            return None
        last = (
            "SELECT id, attribute, value, problem FROM _sync_refusals WHERE type = ? "
            "ORDER BY last_at DESC, id DESC, attribute LIMIT 1"
        )
        return (
            [(t, n, at, self.conn.execute(last, (t,)).fetchone()) for t, n, at in refused],
            coerced,
        )
