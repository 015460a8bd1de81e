"""The change feed: every write and deletion of a row appends (type, id, op, updated_at) to
`_sync_changes` in the same transaction; a bulk load is one entry per type; `ccsync changes`
prints it; retention drops old entries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sync.cli import main
from sync.model import catalogue
from sync.readers.changes import changes
from sync.store import Mirror
from sync.store.changes import Change
from tests.support.backfilled import backfill
from tests.support.pages import write_page
from tests.support.processes import run, spawn, stop

DEALS = catalogue.TYPES["deals"]


def _deal(rid: int, stamp: str, title: str = "t") -> dict[str, Any]:
    return {"id": str(rid), "type": "deals", "attributes": {"title": title, "updated_at": stamp}}


async def test_a_backfill_is_one_entry_per_type_then_each_change_is_one(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=400, seed=3) as emu:
        db = tmp_path / "mirror.db"
        # With stores: `malls_deals` is derived through `malls_stores` (without them the mall
        # routes fill it after the end phase, one `links` entry per deal, as they should).
        await backfill(emu, db, types=["malls", "stores", "deals"])
        mirror = Mirror.open(db)
        entries = mirror.changes.since()
        assert {(t, op) for _, t, _, op, _, _ in entries} >= {
            ("malls", "backfill"),
            ("deals", "backfill"),
        }
        assert all(e[3] == "backfill" for e in entries)  # not one entry per row
        last = entries[-1][0]
        rid = int(emu.ids("deals")[0])
        stored, title = mirror.conn.execute(
            "SELECT updated_at, title FROM deals WHERE id = ?", (rid,)
        ).fetchone()

        write_page(mirror, DEALS, [_deal(rid, stored, title)])  # the same copy again: no change
        write_page(mirror, DEALS, [_deal(rid, "2020-01-01T00:00:00.000Z")])  # older: refused
        assert mirror.changes.since(last) == []
        write_page(mirror, DEALS, [_deal(rid, "2099-01-01T00:00:00.000Z", "newer")])
        write_page(mirror, DEALS, [_deal(999_999, "2099-01-01T00:00:00.000Z")])  # a new row
        mirror.table("deals").delete([rid])
        got = [(t, i, op, u) for _, t, i, op, u, _ in mirror.changes.since(last)]
        assert got == [
            ("deals", rid, "upsert", "2099-01-01T00:00:00.000Z"),
            ("deals", 999_999, "upsert", "2099-01-01T00:00:00.000Z"),
            ("deals", rid, "delete", "2099-01-01T00:00:00.000Z"),
        ]
        # A write that rolls back leaves no entry: the feed is in the writing transaction.
        before = mirror.changes.since(last)
        try:
            with mirror._page_transaction():
                mirror.conn.execute(
                    "UPDATE deals SET updated_at = '2100-01-01T00:00:00.000Z' WHERE id = 999999"
                )
                raise RuntimeError("page failed")
        except RuntimeError:
            pass
        assert mirror.changes.since(last) == before
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
        assert mirror.changes.prune(7) == last
        assert mirror.changes.since()[0][0] > last  # sequence numbers go on
        mirror.close()


# -- every change reaches the feed (#33) --------------------------------------------------------


async def _reconcile_full(cfg: Path, env: dict[str, str]) -> None:
    """`ccsync reconcile --full` in a process of its own (it runs its own event loop)."""
    code, _, err = await run("reconcile", "--full", "--config", str(cfg), env=env)
    assert code == 0, err


def _feed(args: list[str]) -> list[dict[str, Any]]:
    r = CliRunner().invoke(main, ["changes", "--json", *args])
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in r.stdout.splitlines()]


async def test_repairs_and_linkage_alone_reach_the_feed_and_nothing_else_does(
    make_emulator: Any, tmp_path: Path
) -> None:
    """A verify repair under an unchanged stamp is a `repair` entry; linkage that changed alone
    (a to-many link, a to-one column, a mall membership) is a `links` entry of its owner; rows
    the verify rewrote unchanged add nothing, and neither does a second pass."""
    async with make_emulator(resources=300, seed=34) as emu:
        db = tmp_path / "m.db"
        await backfill(emu, db, types=["malls", "stores", "deals", "events"])
        cfg = tmp_path / "sync.toml"
        cfg.write_text(
            f'[upstream]\nbase_url = "{emu.base_url}"\nemail = "{emu.email}"\n'
            f'password_env = "FEED_PW"\ntypes = ["malls", "stores", "deals", "events"]\n'
            f'max_backoff = 0.05\n[mirror]\npath = "{db}"\n[logging]\nlevel = "warning"\n'
        )
        last = _feed(["--config", str(cfg)])[-1]["seq"]
        d = emu.data
        retitled, relinked = d.order["deals"][0], d.order["deals"][1]
        now = d.linkage(d.by_type["deals"][relinked], "stores")
        held = set(now) if isinstance(now, list) else set()
        emu.silent_update("deals", retitled, {"title": "silently retitled"})
        emu.silent_update(
            "deals", relinked, links={"stores": [s for s in d.order["stores"] if s not in held][:2]}
        )
        event = d.order["events"][0]
        moved_to = next(
            m for m in d.order["malls"] if m != d.by_type["events"][event].links["mall"]
        )
        emu.silent_update("events", event, links={"mall": moved_to})
        store = d.order["stores"][0]
        store_to = next(m for m in d.order["malls"] if m != d.by_type["stores"][store].mall)
        emu.silent_update("stores", store, mall_id=store_to)

        await _reconcile_full(cfg, {"FEED_PW": emu.password})
        got = {
            (e["type"], e["id"], e["op"])
            for e in _feed(["--config", str(cfg), "--since", str(last)])
        }
        assert ("deals", retitled, "repair") in got
        assert ("deals", relinked, "links") in got
        assert ("events", event, "links") in got
        assert ("stores", store, "links") in got
        assert {(t, i) for t, i, _ in got} <= {
            ("deals", retitled),
            ("deals", relinked),
            ("events", event),
            ("stores", store),
        }, got
        # Nothing changed upstream since: a second full pass adds no entry.
        seen = _feed(["--config", str(cfg)])[-1]["seq"]
        await _reconcile_full(cfg, {"FEED_PW": emu.password})
        assert _feed(["--config", str(cfg), "--since", str(seen)]) == []


def test_the_feed_is_filtered_by_type_and_tells_a_reader_what_was_pruned(tmp_path: Path) -> None:
    """`--type` keeps the named types only; a `--since` older than what retention kept gets a
    `pruned` entry first (its seq is the last one pruned), so a reader knows to re-read instead
    of silently missing changes; asking from there on gets no such entry."""
    db = tmp_path / "m.db"
    mirror = Mirror.open(db)
    for rid in range(1, 6):
        write_page(mirror, DEALS, [_deal(rid, f"2026-01-0{rid}T00:00:00.000Z")])
    stores = catalogue.TYPES["stores"]
    write_page(
        mirror,
        stores,
        [
            {
                "id": "7",
                "type": "stores",
                "attributes": {"name": "s", "updated_at": "2026-01-01T00:00:00.000Z"},
            }
        ],
        mall_id=1,
    )
    mirror.conn.execute("UPDATE _sync_changes SET at = '2000-01-01T00:00:00.000Z' WHERE seq <= 3")
    assert mirror.changes.prune(7) == 3
    mirror.close()

    entries = _feed(["--mirror", str(db)])
    assert entries[0]["op"] == "pruned" and entries[0]["seq"] == 3
    assert [(e["type"], e["id"]) for e in entries[1:]] == [
        ("deals", 4),
        ("deals", 5),
        ("stores", 7),
    ]
    assert _feed(["--mirror", str(db), "--since", "3"])[0]["id"] == 4
    assert [
        e["type"] for e in _feed(["--mirror", str(db), "--since", "3", "--type", "stores"])
    ] == ["stores"]
    text = CliRunner().invoke(main, ["changes", "--mirror", str(db)])
    assert text.exit_code == 0
    assert text.stdout.splitlines()[0].split("\t")[:4] == ["3", "*", "", "pruned"]
    assert "were pruned" in text.stderr
    bad = CliRunner().invoke(main, ["changes", "--mirror", str(db), "--type", "nosuch"])
    assert bad.exit_code == 2 and "nosuch" in bad.output


async def test_a_follower_filtered_by_type_gets_only_that_type_as_it_comes(tmp_path: Path) -> None:
    """`--follow --type stores`: entries of other types written meanwhile are passed over, and
    each stores entry arrives once, in order, while the follower runs."""
    db = tmp_path / "m.db"
    mirror = Mirror.open(db)
    write_page(mirror, DEALS, [_deal(1, "2026-01-01T00:00:00.000Z")])
    proc = await spawn(
        "changes",
        "--mirror",
        str(db),
        "--follow",
        "--type",
        "stores",
        "--json",
        "--interval",
        "0.05",
    )
    try:
        stores = catalogue.TYPES["stores"]
        for rid in (7, 8):
            write_page(mirror, DEALS, [_deal(100 + rid, "2026-01-02T00:00:00.000Z")])
            write_page(
                mirror,
                stores,
                [
                    {
                        "id": str(rid),
                        "type": "stores",
                        "attributes": {"name": "s", "updated_at": "2026-01-01T00:00:00.000Z"},
                    }
                ],
                mall_id=1,
            )
        assert proc.stdout is not None
        got = [json.loads(await asyncio.wait_for(proc.stdout.readline(), 30)) for _ in range(2)]
        assert [(e["type"], e["id"], e["op"]) for e in got] == [
            ("stores", 7, "upsert"),
            ("stores", 8, "upsert"),
        ]
    finally:
        await stop(proc)
        mirror.close()


def test_the_store_and_the_reader_hand_out_one_change_type(tmp_path: Path) -> None:
    """A feed entry is one value however it is reached: `Mirror.changes` hands out the same
    named `Change` that `ccsync changes` prints (a tuple still: `seq, type, ... = entry`)."""
    mirror = Mirror.open(tmp_path / "m.db")
    write_page(mirror, DEALS, [_deal(1, "2026-01-01T00:00:00.000Z")])
    [entry] = mirror.changes.since()
    assert isinstance(entry, Change) and (entry.type, entry.id, entry.op) == ("deals", 1, "upsert")
    assert list(changes(mirror, 0)) == [entry]
    assert entry.line().split("\t")[:4] == [str(entry.seq), "deals", "1", "upsert"]
    mirror.close()
