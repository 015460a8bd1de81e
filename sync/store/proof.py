"""The proof's bookkeeping (`sync.jobs.proving.proof`): its listing so far, its place, and what it proved.

The rolling proof lists each scope a few pages a tick, so a listing outlives the tick (and the
process): its pages land in `_sync_proof_listing`, keyed by unit, until the unit's listing is
complete and diffed. Everything else it keeps is small JSON in `_sync_meta`, so `ccsync status`
reads it from the mirror alone:

- `proof_position`: the unit, scope and page the cycle stands at (a restart resumes there);
- `proof_proven`: per type, when a whole cycle over its scopes last ended with nothing
  unresolved (`proven_at`), and per type the unresolved difference, if any;
- `repairs`: per type and kind, the rows the proof and the verify repaired (`sync.jobs.proving.proof`
  names the kinds);
- `change_lag`: per type and path, a small summary of the time from a change's stamp to its
  commit (count, and a bounded sample for p50/p99).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from sync.model.stamps import normalize_or_none

POSITION_KEY = "proof_position"
PROVEN_KEY = "proof_proven"
REPAIRS_KEY = "repairs"
LAG_KEY = "change_lag"
#: Lags kept per (type, path) for the percentiles in `ccsync status` (the newest).
LAG_SAMPLE = 200

SCHEMA_LISTING = """
CREATE TABLE IF NOT EXISTS _sync_proof_listing (
    unit TEXT NOT NULL,
    id INTEGER NOT NULL,
    updated_at TEXT,
    PRIMARY KEY (unit, id)
) WITHOUT ROWID
"""
#: Per (type, scope): when its last unit diff ended with nothing unresolved.
SCHEMA_SCOPES = """
CREATE TABLE IF NOT EXISTS _sync_proof_scopes (
    type TEXT NOT NULL,
    scope TEXT NOT NULL,
    proven_at TEXT NOT NULL,
    PRIMARY KEY (type, scope)
) WITHOUT ROWID
"""


class ProofBook:
    """The proof's listing pages and its JSON records, over one mirror connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.execute(SCHEMA_LISTING)
        conn.execute(SCHEMA_SCOPES)

    def scope_proven(self, type_name: str, scope: str, at: str) -> None:
        """One scope of `type_name` (`top`, or a mall id) was proven complete `at`."""
        self.conn.execute(
            "INSERT INTO _sync_proof_scopes (type, scope, proven_at) VALUES (?, ?, ?) "
            "ON CONFLICT(type, scope) DO UPDATE SET proven_at = excluded.proven_at",
            (type_name, scope, at),
        )

    # -- the listing of the unit in progress ---------------------------------------------------

    def add(self, unit: str, items: Iterable[tuple[int, str | None]]) -> None:
        """One listing page's (id, updated_at) pairs for `unit`."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO _sync_proof_listing (unit, id, updated_at) VALUES (?, ?, ?)",
            ((unit, i, normalize_or_none(u)) for i, u in items),
        )

    def listed(self, unit: str) -> Iterator[tuple[int, str | None]]:
        """What the unit's listing holds so far."""
        rows = self.conn.execute(
            "SELECT id, updated_at FROM _sync_proof_listing WHERE unit = ?", (unit,)
        ).fetchall()
        for rid, stamp in rows:
            yield int(rid), stamp

    def canaries(self, unit: str, n: int, skip: int = 0) -> list[int]:
        """The `n` most recently changed ids the unit's listing holds (after the `skip` most
        recent): known alive."""
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM _sync_proof_listing WHERE unit = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                (unit, n, skip),
            )
        ]

    def clear(self, unit: str) -> None:
        """Forget a unit's listing."""
        self.conn.execute("DELETE FROM _sync_proof_listing WHERE unit = ?", (unit,))

    def clear_prefix(self, prefix: str) -> None:
        """Forget the listings of every unit whose key starts with `prefix` ("": all)."""
        self.conn.execute(
            "DELETE FROM _sync_proof_listing WHERE substr(unit, 1, ?) = ?", (len(prefix), prefix)
        )


# -- the records' rules, for either mirror (`sync.store.pg.proof` keeps them too) ---------------


def decoded(text: str | None) -> Any:
    """A record's stored JSON text, parsed; None when absent or damaged."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def as_record(value: Any) -> dict[str, Any]:
    """A decoded record that must be an object: {} for anything else (absent, damaged)."""
    return value if isinstance(value, dict) else {}


def with_proven(
    data: dict[str, Any], type_name: str, *, at: str | None, unresolved: int, why: str | None
) -> dict[str, Any]:
    """`proof_proven` (`data`, changed in place and returned) after a cycle of `type_name`
    ended: proven complete `at` when nothing is unresolved, else the last proof time kept."""
    entry = dict(data.get(type_name) or {})
    if unresolved == 0 and at is not None:
        entry["proven_at"] = at
    entry.setdefault("proven_at", None)
    entry["unresolved"] = unresolved
    entry["why"] = why
    data[type_name] = entry
    return data


def with_repairs(data: dict[str, Any], type_name: str, kind: str, n: int) -> dict[str, Any]:
    """`repairs` (`data`, changed in place and returned) with `n` more of `kind` for
    `type_name` (the callers add nothing for `n` <= 0)."""
    kinds = data.setdefault(type_name, {})
    kinds[kind] = int(kinds.get(kind, 0)) + n
    return data


def with_lags(
    data: dict[str, Any], type_name: str, path: str, seconds: list[float]
) -> dict[str, Any]:
    """`change_lag` (`data`, changed in place and returned) with `seconds` counted for (type,
    path) and its sample the newest `LAG_SAMPLE`, rounded to the millisecond."""
    entry = data.setdefault(type_name, {}).setdefault(path, {"count": 0, "sample": []})
    entry["count"] = int(entry.get("count", 0)) + len(seconds)
    entry["sample"] = (list(entry.get("sample") or []) + [round(s, 3) for s in seconds])[
        -LAG_SAMPLE:
    ]
    return data


# -- JSON records in `_sync_meta` (read by `ccsync status` too) ----------------------------------


def _get(conn: sqlite3.Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM _sync_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else decoded(row[0])


def _set(conn: sqlite3.Connection, key: str, value: Any) -> None:
    if value is None:
        conn.execute("DELETE FROM _sync_meta WHERE key = ?", (key,))
        return
    conn.execute(
        "INSERT INTO _sync_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, orjson.dumps(value).decode()),
    )


def position(conn: sqlite3.Connection) -> dict[str, Any] | None:
    value = _get(conn, POSITION_KEY)
    return value if isinstance(value, dict) else None


def set_position(conn: sqlite3.Connection, value: dict[str, Any] | None) -> None:
    _set(conn, POSITION_KEY, value)


def proven(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Per type: `proven_at` (None before a first clean cycle), `unresolved` rows and `why`."""
    return as_record(_get(conn, PROVEN_KEY))


def record_proven(
    conn: sqlite3.Connection,
    type_name: str,
    *,
    at: str | None,
    unresolved: int = 0,
    why: str | None = None,
) -> None:
    """A cycle ended for `type_name`: proven complete `at` (when nothing is unresolved), or
    not, with how many rows are unresolved and why (the last proof time kept)."""
    data = with_proven(proven(conn), type_name, at=at, unresolved=unresolved, why=why)
    _set(conn, PROVEN_KEY, data)


def scopes(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Per type: how many scopes were proven, and the oldest scope's time and name."""
    try:
        rows = conn.execute(
            "SELECT type, count(*), min(proven_at) FROM _sync_proof_scopes GROUP BY type"
        ).fetchall()
    except sqlite3.OperationalError:
        return {}  # a mirror no proof ran on
    out: dict[str, dict[str, Any]] = {}
    for name, n, oldest in rows:
        scope = conn.execute(
            "SELECT scope FROM _sync_proof_scopes WHERE type = ? AND proven_at = ? LIMIT 1",
            (name, oldest),
        ).fetchone()
        out[str(name)] = {"scopes": int(n), "oldest_at": oldest, "oldest_scope": scope[0]}
    return out


def repairs(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    return as_record(_get(conn, REPAIRS_KEY))


def count_repairs(conn: sqlite3.Connection, type_name: str, kind: str, n: int) -> None:
    """Add `n` repairs of `kind` to `type_name`'s totals."""
    if n <= 0:
        return
    _set(conn, REPAIRS_KEY, with_repairs(repairs(conn), type_name, kind, n))


def lags(conn: sqlite3.Connection) -> dict[str, dict[str, dict[str, Any]]]:
    return as_record(_get(conn, LAG_KEY))


def record_lags(conn: sqlite3.Connection, type_name: str, path: str, seconds: list[float]) -> None:
    """Keep the count and the newest `LAG_SAMPLE` lags of (type, path)."""
    if not seconds:
        return
    _set(conn, LAG_KEY, with_lags(lags(conn), type_name, path, seconds))


class ProofRecords:
    """The proof's small JSON records (`proof_position`, `proof_proven`, `repairs`,
    `change_lag`, and the scopes proven) on one mirror connection: `Mirror.proof`. Reading
    makes nothing, so a read-only open (`ccsync status`) reads them too."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def book(self) -> ProofBook:
        """The proof's listing pages (`ProofBook`; its tables made on first use)."""
        return ProofBook(self._conn)

    def position(self) -> dict[str, Any] | None:
        return position(self._conn)

    def set_position(self, value: dict[str, Any] | None) -> None:
        set_position(self._conn, value)

    def proven(self) -> dict[str, dict[str, Any]]:
        return proven(self._conn)

    def record_proven(
        self, type_name: str, *, at: str | None, unresolved: int = 0, why: str | None = None
    ) -> None:
        record_proven(self._conn, type_name, at=at, unresolved=unresolved, why=why)

    def scopes(self) -> dict[str, dict[str, Any]]:
        return scopes(self._conn)

    def repairs(self) -> dict[str, dict[str, int]]:
        return repairs(self._conn)

    def count_repairs(self, type_name: str, kind: str, n: int) -> None:
        count_repairs(self._conn, type_name, kind, n)

    def lags(self) -> dict[str, dict[str, dict[str, Any]]]:
        return lags(self._conn)

    def record_lags(self, type_name: str, path: str, seconds: list[float]) -> None:
        record_lags(self._conn, type_name, path, seconds)


def percentile(sample: list[float], q: float) -> float | None:
    """The `q` quantile (0..1) of `sample` (nearest rank), None when empty."""
    if not sample:
        return None
    ordered = sorted(sample)
    rank = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 1)) - 1))
    return ordered[rank]
