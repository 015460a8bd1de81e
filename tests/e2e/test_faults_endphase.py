"""The end phase of a bulk load is crash-safe (#31): a process killed with SIGKILL anywhere in
`Mirror.indexes.defer(False)` (B-tree indexes, the FTS5 side build and its copy-in, the
full-text and change-feed triggers, the views) leaves a mirror that the next `Mirror.open`
completes: the same schema as an uninterrupted run, every FTS5 index passing its
integrity-check, and search finding a row changed afterwards.

The kill points are exact, not timed: a child process counts the statements every SQLite
connection it makes starts (a trace callback) and the virtual machine's steps (a progress
handler, every `TICK` instructions), and kills itself with SIGKILL at the k-th one, k drawn
from a seeded generator over the counts of an uninterrupted run. `SYNC_ENDPHASE_SEED=<seed>`
replays a failure.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from sync.model import catalogue
from sync.store import Mirror
from sync.store.mirror import END_PHASE
from tests.support.pages import write_page
from tests.support.paths import ROOT

TICK = 200

#: The child: a bulk load into a fresh mirror, then its end phase, with every SQLite connection
#: counting statements and VM steps; `kill <stmt|tick> <k>` kills it with SIGKILL at the k-th.
CHILD = r"""
import os, signal, sqlite3, sys, threading
from sync.model import catalogue
from sync.store import Mirror
from sync.store.mirror import END_PHASE
from tests.support.pages import write_page

path, mode, kind, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
TICK = int(sys.argv[5])
WORDS = ["amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "heath", "iris", "juniper"]
counts = {"stmt": 0, "tick": 0}
lock = threading.Lock()
armed = False

def count(what):
    if not armed:
        return 0
    with lock:
        counts[what] += 1
        hit = mode == "kill" and what == kind and counts[what] == k
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
    return 0

def hook(conn):
    conn.set_trace_callback(lambda sql: count("stmt"))
    conn.set_progress_handler(lambda: count("tick"), TICK)
    return conn

real_connect = sqlite3.connect
sqlite3.connect = lambda *a, **kw: hook(real_connect(*a, **kw))

def res(t, i, rels=None, **attrs):
    attrs["updated_at"] = "2026-01-01T00:00:00.000Z"
    out = {"id": str(i), "type": t, "attributes": attrs}
    if rels:
        out["relationships"] = rels
    return out

def w(i, n=3):
    return " ".join(WORDS[(i * 7 + j) % 10] for j in range(n))

m = Mirror.open(path)
m.indexes.defer(True)
T = catalogue.TYPES
write_page(m, T["malls"], [res("malls", i, name=w(i), city=w(i, 1), description=w(i, 8))
                          for i in range(1, 21)])
for start in range(1, 1201, 100):
    ids = range(start, start + 100)
    images = [res("images", i, alt_text=w(i), url=f"u{i}") for i in ids]
    tags = [res("tags", i % 50 + 1, name=w(i, 1)) for i in ids]
    link = lambda i: {"images": {"data": [{"type": "images", "id": str(i)}]},
                      "tags": {"data": [{"type": "tags", "id": str(i % 50 + 1)}]}}
    write_page(m, T["deals"], [res("deals", i, link(i), title=w(i), description=w(i, 12),
                                  retailer_name=w(i, 1), is_local=i % 2 == 0) for i in ids],
                 images + tags)
    write_page(m, T["stores"], [res("stores", i, link(i), name=w(i), description=w(i, 12))
                               for i in ids], images + tags, mall_id=start // 100 + 1)
    write_page(m, T["articles"], [res("articles", i, link(i), title=w(i), content=w(i, 20))
                                 for i in ids], images + tags)
armed = True
m.indexes.defer(False)
armed = False
m.close()
print(counts["stmt"], counts["tick"], flush=True)
"""


def _child(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(db), *args, str(TICK)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _schema(db: Path) -> list[tuple[str, str, str]]:
    """(type, name, SQL with its whitespace folded) of everything in the mirror but the
    transient listing tables."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sorted(
            (t, n, " ".join((sql or "").split()))
            for t, n, sql in conn.execute("SELECT type, name, sql FROM sqlite_master")
            if not n.startswith("_sync_listing_")
        )
    finally:
        conn.close()


def _fts_tables(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE "
            "'CREATE VIRTUAL TABLE%USING FTS5%'"
        )
    ]


def _check_reopened(db: Path, reference: list[tuple[str, str, str]]) -> list[str]:
    """Open the mirror as the next run would, and list what is not as an uninterrupted run
    left it (empty when all is well)."""
    problems: list[str] = []
    m = Mirror.open(db)
    try:
        for table in _fts_tables(m.conn):
            try:
                m.conn.execute(
                    f"INSERT INTO [{table}]([{table}], rank) VALUES('integrity-check', 1)"
                )
            except sqlite3.DatabaseError as exc:
                problems.append(f"{table}: integrity-check: {exc}")
        write_page(
            m,
            catalogue.TYPES["stores"],
            [
                {
                    "id": "7",
                    "type": "stores",
                    "attributes": {
                        "name": "zanzibar quokka",
                        "updated_at": "2027-01-01T00:00:00.000Z",
                    },
                }
            ],
            mall_id=1,
        )
        for table, column in (("deals", "title"), ("articles", "title"), ("images", "alt_text")):
            m.conn.execute(f"UPDATE [{table}] SET [{column}] = 'xylophone' WHERE id = 9")
        for table, token in (
            ("stores", "quokka"),
            ("deals", "xylophone"),
            ("articles", "xylophone"),
            ("images", "xylophone"),
        ):
            found = [
                r[0]
                for r in m.conn.execute(
                    f"SELECT rowid FROM [{table}_fts] WHERE [{table}_fts] MATCH ?", (token,)
                )
            ]
            if found != [7 if table == "stores" else 9]:
                problems.append(f"{table}_fts MATCH {token!r} found {found}")
        if m.meta.get(END_PHASE):
            problems.append("the end phase is still marked unfinished")
    finally:
        m.close()
    got = _schema(db)
    missing = sorted(set(reference) - set(got))
    extra = sorted(set(got) - set(reference))
    problems += [f"missing {t} {n}" for t, n, _ in missing]
    problems += [f"unexpected {t} {n}" for t, n, _ in extra]
    if Path(f"{db}-fts-build").exists():
        problems.append("the side build's scratch file was left behind")
    return problems


def _rounds(tmp_path: Path, rounds: int) -> None:
    seed = int(os.environ.get("SYNC_ENDPHASE_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    ref = tmp_path / "reference.db"
    done = _child(ref, "count", "stmt", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    statements, ticks = (int(x) for x in done.stdout.split()[-2:])
    assert statements > 50 and ticks > 50, done.stdout  # the kill points cover a real end phase
    Mirror.open(ref).close()
    reference = _schema(ref)
    killed = 0
    failures: list[str] = []
    for n in range(rounds):
        db = tmp_path / f"round{n}.db"
        # Half at statement boundaries, half inside statements (index builds, the FTS copy).
        kind, total = ("stmt", statements) if n % 2 == 0 else ("tick", ticks)
        # Spread over the whole phase: one point drawn from each of `rounds` equal slices.
        half = max(1, rounds // 2)
        lo = total * (n // 2) // half
        hi = max(lo + 1, total * (n // 2 + 1) // half)
        k = rng.randrange(lo, hi) + 1
        run = _child(db, "kill", kind, str(k))
        if run.returncode == -9:
            killed += 1
        elif run.returncode != 0:
            failures.append(f"round {n} ({kind} {k}): child failed: {run.stderr[-1500:]}")
            continue
        problems = _check_reopened(db, reference)
        if problems:
            failures.append(f"round {n} ({kind} {k} of {total}): " + "; ".join(problems))
    assert not failures, f"seed {seed} (SYNC_ENDPHASE_SEED replays it):\n" + "\n".join(failures)
    assert killed >= rounds * 3 // 4, f"seed {seed}: only {killed} of {rounds} rounds were killed"


def test_a_kill_anywhere_in_the_end_phase_is_repaired_by_the_next_open(tmp_path: Path) -> None:
    """24 kills with SIGKILL spread over the end phase: after each, the next open leaves the
    schema of an uninterrupted run, clean FTS5 indexes, and search that follows changes."""
    _rounds(tmp_path, 24)


@pytest.mark.slow
def test_many_kills_in_the_end_phase(tmp_path: Path) -> None:
    """The same, 120 kill points."""
    _rounds(tmp_path, int(os.environ.get("SYNC_ENDPHASE_ROUNDS") or 120))


def _loaded(db: Path) -> None:
    """A small mirror, its end phase done (stores, with a full-text index)."""
    m = Mirror.open(db)
    m.indexes.defer(True)
    write_page(
        m,
        catalogue.TYPES["stores"],
        [
            {
                "id": str(i),
                "type": "stores",
                "attributes": {"name": f"store {i}", "updated_at": "2026-01-01T00:00:00.000Z"},
            }
            for i in range(1, 51)
        ],
        mall_id=1,
    )
    m.indexes.defer(False)
    m.close()


def _search_follows_a_change(db: Path) -> None:
    m = Mirror.open(db)
    try:
        m.conn.execute("UPDATE stores SET name = 'wombat' WHERE id = 3")
        hits = m.conn.execute("SELECT rowid FROM stores_fts WHERE stores_fts MATCH 'wombat'")
        assert [r[0] for r in hits] == [3]
        m.conn.execute("INSERT INTO stores_fts(stores_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        m.close()


def test_an_index_left_without_its_triggers_is_rebuilt(tmp_path: Path) -> None:
    """What an older sync killed inside sqlite-utils' `enable_fts` left: the index, but not
    its triggers (stale from then on); the next open rebuilds it, and says so."""
    db = tmp_path / "m.db"
    _loaded(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER stores_au")
    conn.execute("UPDATE stores SET name = 'stale' WHERE id = 3")
    conn.commit()
    conn.close()
    with capture_logs() as logs:
        _search_follows_a_change(db)
    assert [e["table"] for e in logs if e["event"] == "mirror.fts_rebuilt"] == ["stores_fts"]


def test_triggers_left_without_their_index_are_replaced(tmp_path: Path) -> None:
    """`disable_fts` killed between its steps: the triggers name an index that is gone, so
    every write to the table failed; the next open builds the index under them."""
    db = tmp_path / "m.db"
    _loaded(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE stores_fts")
    conn.commit()
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        conn.execute("UPDATE stores SET name = 'x' WHERE id = 3")
    conn.close()
    _search_follows_a_change(db)


def test_an_unfinished_end_phase_checks_every_index_against_its_table(tmp_path: Path) -> None:
    """With the end phase marked unfinished, the open runs FTS5's integrity-check (rank 1:
    the index against the rows) and rebuilds an index that fails it, and removes the side
    build's scratch file; a healthy mirror's open skips that check (too slow at 1M rows)."""
    db = tmp_path / "m.db"
    _loaded(db)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO stores_fts(stores_fts) VALUES ('delete-all')")  # an empty index
    conn.commit()
    conn.close()
    Mirror.open(db).close()  # not marked: not checked
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        conn.execute("INSERT INTO stores_fts(stores_fts, rank) VALUES ('integrity-check', 1)")
    conn.execute("INSERT INTO _sync_meta (key, value) VALUES (?, 'x')", (END_PHASE,))
    conn.commit()
    conn.close()
    Path(f"{db}-fts-build").write_bytes(b"left by a killed side build")
    with capture_logs() as logs:
        _search_follows_a_change(db)
    assert [e["why"] for e in logs if e["event"] == "mirror.fts_rebuilt"] == [
        "its integrity-check failed (database disk image is malformed)"
    ]
    assert not Path(f"{db}-fts-build").exists()
