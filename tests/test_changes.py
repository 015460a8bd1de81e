"""The change feed: every write and deletion of a row appends (type, id, op, updated_at) to
`_sync_changes` in the same transaction; a bulk load is one entry per type; `ccsync changes`
prints it; retention drops old entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sync.cli import main
from sync.model import catalogue
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.pages import write_page

DEALS = catalogue.TYPES["deals"]


def _deal(rid: int, stamp: str, title: str = "t") -> dict[str, Any]:
    return {"id": str(rid), "type": "deals", "attributes": {"title": title, "updated_at": stamp}}


async def test_a_backfill_is_one_entry_per_type_then_each_change_is_one(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=400, seed=3) as emu:
        db = tmp_path / "mirror.db"
        await backfill(emu, db, types=["malls", "deals"])
        mirror = Mirror.open(db)
        entries = mirror.changes()
        assert {(t, op) for _, t, _, op, _, _ in entries} >= {
            ("malls", "backfill"),
            ("deals", "backfill"),
        }
        assert all(e[3] == "backfill" for e in entries)  # not one entry per row
        last = entries[-1][0]
        rid = int(emu.ids("deals")[0])
        stored = mirror.conn.execute(
            "SELECT updated_at FROM deals WHERE id = ?", (rid,)
        ).fetchone()[0]

        write_page(mirror, DEALS, [_deal(rid, stored)])  # the same copy again: no change
        write_page(mirror, DEALS, [_deal(rid, "2020-01-01T00:00:00.000Z")])  # older: refused
        assert mirror.changes(last) == []
        write_page(mirror, DEALS, [_deal(rid, "2099-01-01T00:00:00.000Z", "newer")])
        write_page(mirror, DEALS, [_deal(999_999, "2099-01-01T00:00:00.000Z")])  # a new row
        mirror.delete("deals", [rid])
        got = [(t, i, op, u) for _, t, i, op, u, _ in mirror.changes(last)]
        assert got == [
            ("deals", rid, "upsert", "2099-01-01T00:00:00.000Z"),
            ("deals", 999_999, "upsert", "2099-01-01T00:00:00.000Z"),
            ("deals", rid, "delete", "2099-01-01T00:00:00.000Z"),
        ]
        # A write that rolls back leaves no entry: the feed is in the writing transaction.
        before = mirror.changes(last)
        try:
            with mirror._page_transaction():
                mirror.conn.execute(
                    "UPDATE deals SET updated_at = '2100-01-01T00:00:00.000Z' WHERE id = 999999"
                )
                raise RuntimeError("page failed")
        except RuntimeError:
            pass
        assert mirror.changes(last) == before
        mirror.close()

        cfg = tmp_path / "sync.toml"
        cfg.write_text(
            f'[upstream]\nbase_url = "{emu.base_url}"\nemail = "a@b.c"\npassword = "pw"\n'
            f'[mirror]\npath = "{db}"\n'
        )
        r = CliRunner().invoke(
            main, ["changes", "--config", str(cfg), "--since", str(last), "--json"]
        )
        assert r.exit_code == 0, r.output
        lines = [json.loads(x) for x in r.output.splitlines()]
        assert [(d["type"], d["id"], d["op"]) for d in lines] == [
            ("deals", rid, "upsert"),
            ("deals", 999_999, "upsert"),
            ("deals", rid, "delete"),
        ]
        assert all(d["seq"] > last for d in lines)

        mirror = Mirror.open(db)
        mirror.conn.execute(
            "UPDATE _sync_changes SET at = '2000-01-01T00:00:00.000Z' WHERE seq <= ?", (last,)
        )
        assert mirror.prune_changes(7) == last
        assert mirror.changes()[0][0] > last  # sequence numbers go on
        mirror.close()
