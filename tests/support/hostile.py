"""What the hostile-input suites (`test_hostile`, `test_hostile_files`) share: a snapshot of the
mirrored rows to compare before and after a hostile case, the one error line a refused command
prints, and the suites' `sync.toml` for the `ccsync` subprocess.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sync.emulator import Emulator
from tests.support.processes import CLI_PASSWORD_ENV
from tests.support.settings import upstream_keys
from tests.support.settings import write_config as write_toml

STAMPS = frozenset({"fetched_at", "first_seen_at", "last_seen_at"})
#: Bookkeeping, and the hours windows every run replaces wholesale (for the malls it knows).
NOT_MIRRORED_ROWS = ("_sync_", "sqlite_", "hours", "current_hours")


# -- helpers -------------------------------------------------------------------------------------


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every mirrored row (see NOT_MIRRORED_ROWS), fetch stamps left out."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        tables = [
            r[0]
            for r in conn.execute("select name from sqlite_master where type = 'table'")
            if not r[0].startswith(NOT_MIRRORED_ROWS)
            # FTS5 shadow tables: an index's segments, not rows (a re-write of the same row
            # adds segments); the content they index is compared in its own table.
            and "_fts" not in r[0]
        ]
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in tables:
            cur = conn.execute(f"select * from [{table}]")
            keep = [i for i, d in enumerate(cur.description) if d[0] not in STAMPS]
            out[table] = sorted((tuple(r[i] for i in keep) for r in cur), key=repr)
        return out
    finally:
        conn.close()


def without_row(snap: dict[str, list[tuple[Any, ...]]], table: str, rid: str) -> dict[str, Any]:
    """`snap` less one row (rows of content tables start with their id)."""
    return {**snap, table: [r for r in snap[table] if r[0] != int(rid)]}


def error_line(rc: int, err: str, expected_rc: int = 1) -> str:
    """The one `ccsync: ...` line a failed command prints: no traceback, the right exit code."""
    lines = [line for line in err.splitlines() if line.startswith("ccsync: ")]
    assert rc == expected_rc and len(lines) == 1 and "Traceback" not in err, (rc, err)
    return lines[0]


def write_config(
    tmp_path: Path,
    base_url: str,
    emu: Emulator,
    *,
    types: tuple[str, ...] = ("malls", "deals", "articles"),
    db: Path | None = None,
    level: str = "warning",
    webhooks: dict[str, Any] | None = None,
) -> Path:
    """A sync.toml for the CLI (the password comes from $CLI_PW, see `support.processes.ccsync`)."""
    return write_toml(
        tmp_path / "sync.toml",
        upstream=upstream_keys(
            emu,
            CLI_PASSWORD_ENV,
            base_url=base_url,
            types=list(types),
            page_size=10,
            concurrency=2,
            max_backoff=0.05,
            retry_budget=10.0,
        ),
        mirror={"path": db or tmp_path / "m.db"},
        webhooks=webhooks or {"enabled": False},
        logging={"level": level, "format": "json"},
    )
