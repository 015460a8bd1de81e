"""Misfit values of a page: refused and coerced values logged, recorded and counted.

Staging (`sync.pipeline.staging`) leaves out a row whose value does not fit its declared type
(the mirror keeps its last good copy) and converts a value that fits losslessly. Inside the
page's transaction, the writer logs each, records them in `_sync_refusals` and `_sync_coercions`
(shown by `ccsync status`: `ValueNotes.faults`), tells the daemon's metrics (`on_values`), and
forgets the refusals of rows a later page writes cleanly. The mirror holds one `ValueNotes`
(`Mirror.values`).

What is noted, logged, told and forgotten is `Notes`'s, written once for both stores; the
SQLite statements are `ValueNotes`'s, PostgreSQL's `sync.store.pg.values.ValueNotes`'s.
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sync.core.logs import get_logger
from sync.core.redact import redact_text
from sync.model.stamps import now_iso
from sync.pipeline.batches import Staged

_log = get_logger("sync.store")

#: Told (type, "refused" or "coerced", how many) of each page's misfit values.
OnValues = Callable[[str, str, int], None]

#: The columns of a fault's last refused value (`Notes.faults`), as `last_refused` names them.
LAST_REFUSED = ("id", "attribute", "value", "problem")


def refusal_rows(
    type_name: str, refused: Sequence[tuple[int, str, str, str]], now: str
) -> list[tuple[str, int, str, str, str, str, str]]:
    """`_sync_refusals` rows of a batch's refused values (type, id, attribute, value redacted,
    problem, first and last seen `now`), in the batch's order."""
    return [(type_name, rid, a, redact_text(v), p, now, now) for rid, a, v, p in refused]


def coercion_rows(
    type_name: str, coerced: Sequence[tuple[int, str, str]], now: str
) -> list[tuple[str, str, int, int, str, str]]:
    """`_sync_coercions` counts of a batch's coerced values, one per attribute in the order
    first met: (type, attribute, how many, the last one's id and value redacted, `now`)."""
    per: dict[str, list[tuple[int, str]]] = {}
    for rid, attribute, value in coerced:
        per.setdefault(attribute, []).append((rid, value))
    return [
        (type_name, a, len(items), items[-1][0], redact_text(items[-1][1]), now)
        for a, items in per.items()
    ]


def faults_of(
    refused: Iterable[tuple[str, int, str | None, Any]],
    coerced: Iterable[tuple[str, Any]],
) -> dict[str, dict[str, Any]]:
    """`Notes.faults` from what the tables hold: `refused` per type (type, rows held, their
    last `last_at`, the last one's `LAST_REFUSED` values), `coerced` per type (type, the sum of
    its counts)."""
    out: dict[str, dict[str, Any]] = {}
    for t, n, last_at, last in refused:
        out.setdefault(t, {"refused": 0, "coerced": 0})
        out[t]["refused"] = int(n)
        out[t]["last_refused"] = dict(zip(LAST_REFUSED, last, strict=True), at=last_at)
    for t, n in coerced:
        out.setdefault(t, {"refused": 0, "coerced": 0})["coerced"] = int(n)
    return out


class Notes(abc.ABC):
    """What this process knows of misfit values: refused ids per type, coercions logged; the
    statements that keep them are a store's (`_record`, `_held`, `_forget`, `faults`)."""

    def __init__(self) -> None:
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
                self._refused_ids = self._held()
            if b.refused or b.coerced:
                self._record(b.type, b.refused, b.coerced)
                self._refused_ids.setdefault(b.type, set()).update(r[0] for r in b.refused)
                if self.on_values is not None:
                    for outcome, n in (("refused", len(b.refused)), ("coerced", len(b.coerced))):
                        if n:
                            self.on_values(b.type, outcome, n)
            held = self._refused_ids.get(b.type)
            if held and b.ids:  # a set intersection a page: nothing to do on a clean mirror
                again = held.intersection(b.ids)
                if again:
                    self._forget(b.type, sorted(again))

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

    @abc.abstractmethod
    def _record(
        self,
        type_name: str,
        refused: Sequence[tuple[int, str, str, str]],
        coerced: Sequence[tuple[int, str, str]],
    ) -> None:
        """Keep each refused value (one row per type, id and attribute, until a copy of the
        row is written: `_forget`; `refusal_rows`, its `times` counted up) and count the
        coerced ones per attribute (`coercion_rows`, added to what is counted)."""

    @abc.abstractmethod
    def _held(self) -> dict[str, set[int]]:
        """The ids of rows `_sync_refusals` holds, per type (few: rows with a misfit value)."""

    @abc.abstractmethod
    def _forget(self, type_name: str, ids: Sequence[int]) -> None:
        """Rows of `ids` are being written: their earlier refusals are history."""

    @abc.abstractmethod
    def faults(self) -> dict[str, dict[str, Any]]:
        """Per type: values refused (rows held at their last good copy) and the last one (the
        latest `last_at`, of those the highest id, of those the first attribute), and values
        coerced; for `ccsync status` (`faults_of`). Empty for a mirror written before these
        existed."""


class ValueNotes(Notes):
    """`Notes` in the SQLite mirror."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__()
        self.conn = conn

    def _record(
        self,
        type_name: str,
        refused: Sequence[tuple[int, str, str, str]],
        coerced: Sequence[tuple[int, str, str]],
    ) -> None:
        now = now_iso()
        self.conn.executemany(
            "INSERT INTO _sync_refusals (type, id, attribute, value, problem, first_at, last_at, "
            "times) VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT(type, id, attribute) DO UPDATE "
            "SET value = excluded.value, problem = excluded.problem, last_at = excluded.last_at, "
            "times = times + 1",
            refusal_rows(type_name, refused, now),
        )
        self.conn.executemany(
            "INSERT INTO _sync_coercions (type, attribute, count, last_id, last_value, last_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(type, attribute) DO UPDATE SET "
            "count = count + excluded.count, last_id = excluded.last_id, "
            "last_value = excluded.last_value, last_at = excluded.last_at",
            coercion_rows(type_name, coerced, now),
        )

    def _held(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for t, rid in self.conn.execute("SELECT DISTINCT type, id FROM _sync_refusals"):
            out.setdefault(t, set()).add(int(rid))
        return out

    def _forget(self, type_name: str, ids: Sequence[int]) -> None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            self.conn.execute(
                f"DELETE FROM _sync_refusals WHERE type = ? AND id IN ({','.join('?' * len(chunk))})",
                (type_name, *chunk),
            )

    def faults(self) -> dict[str, dict[str, Any]]:
        try:
            refused = self.conn.execute(
                "SELECT type, count(*), max(last_at) FROM _sync_refusals GROUP BY type"
            ).fetchall()
            coerced = self.conn.execute(
                "SELECT type, sum(count) FROM _sync_coercions GROUP BY type"
            ).fetchall()
        except sqlite3.OperationalError:  # read-only open of a mirror without the tables
            return {}
        last = (
            "SELECT id, attribute, value, problem FROM _sync_refusals WHERE type = ? "
            "ORDER BY last_at DESC, id DESC, attribute LIMIT 1"
        )
        return faults_of(
            ((t, n, at, self.conn.execute(last, (t,)).fetchone()) for t, n, at in refused),
            coerced,
        )
