"""Two versions under one stamp: a copy held under the stamp listed is the version served only
once that stamp is settled (`sync.jobs.evidence.Settling`).

Stamps of whole seconds let two changes of a row share one, and the second may commit late (a
long transaction stamped when it began): the mirror holds the first version under stamp S, the
upstream then serves the second under S. The proof's diff and the reconcile compared stamps
only (listed > held), so neither ever fetched it: `ccsync reconcile` exited 0 with the row
stale (the strict chaos suite's `stale ifeatures: ['41']`, seed 1033010897). Now rows listed
under their held stamp within the horizon (lateness ceiling + a second) are asked again and
compared whole; older equal stamps are not asked (the `--full` verify's part), so the cost is
the rows changed within the horizon.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from sync.emulator.commits import Pending
from sync.jobs.proving.proof import run_proof_cycle
from sync.jobs.proving.reconcile import run_reconcile
from tests.support.backfilled import backfill
from tests.support.compare import compare


def _title(db: Path, rid: int) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("SELECT title FROM articles WHERE id = ?", (rid,)).fetchone()[0])
    finally:
        conn.close()


def _second_version_late(emu: Any, rid: int, title: str) -> str:
    """A change of `rid` stamped with the stamp it holds, made visible now (a late commit)."""
    stamp = str(emu.data.by_type["articles"][rid].decoded()["updated_at"])
    emu.data.commits.hold("articles", rid, Pending(emu.data.clock(), stamp, {"title": title}))
    emu.data.settle(float("inf"))
    return stamp


async def test_a_second_version_under_a_recent_stamp_is_repaired_by_the_reconcile(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=150, seed=7) as emu:
        emu.hard.whole_second_stamps = True
        recent, old = (int(i) for i in emu.ids("articles")[4:6])
        emu.data.update("articles", recent)  # stamped now: within the horizon
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        stamp = _second_version_late(emu, recent, "the second version")
        _second_version_late(emu, old, "an old row's second version")
        assert emu.data.by_type["articles"][recent].decoded()["updated_at"] == stamp
        assert compare(db, emu, ["articles"]).stale["articles"] == sorted(
            [str(recent), str(old)], key=int
        )
        with capture_logs() as events:
            out, unresolved = await run_proof_cycle(settings)  # `ccsync reconcile`
        assert unresolved == []
        assert _title(db, recent) == "the second version"
        repairs = [e for e in events if e["event"] == "proof.repaired"]
        assert [(e["kind"], e["ids"]) for e in repairs] == [("same_stamp_content", [recent])]
        assert out["articles"] == (1, 0)
        # A stamp past the horizon is taken as the same version: the `--full` verify's part.
        assert compare(db, emu, ["articles"]).stale["articles"] == [str(old)]


async def test_the_library_reconcile_asks_a_recent_equal_stamp_again_and_claims_only_what_differed(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=150, seed=8) as emu:
        emu.hard.whole_second_stamps = True
        changed, same = (int(i) for i in emu.ids("articles")[2:4])
        emu.data.update("articles", changed)
        emu.data.update("articles", same)
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        _second_version_late(emu, changed, "changed under its stamp")
        out, refusals = await run_reconcile(settings)
        assert refusals == []
        assert out["articles"] == (1, 0)  # `same` was asked again, and is not claimed
        assert _title(db, changed) == "changed under its stamp"
        assert compare(db, emu, ["articles"]).differences == 0
