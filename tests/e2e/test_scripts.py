"""`meta.scripts` mirrored exactly: per resource type, in order, a script no longer served gone."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.emulator import Emulator
from sync.emulator.responses import SCRIPTS
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.poll import Poller
from sync.model import catalogue
from sync.model.scopes import Scope, scopes_of
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.pages import write_page
from tests.support.settings import settings_for

DEALS = catalogue.TYPES["deals"]
ARTICLES = catalogue.TYPES["articles"]
A = {"type": "text/javascript", "content": "a()"}
B = {"type": "application/ld+json", "content": '{"@type": "Thing"}'}
C = {"type": "text/javascript", "content": "c()"}
B_ROW = ("application/ld+json", '{"@type": "Thing"}')


def held(db: Path | sqlite3.Connection, type_name: str) -> list[tuple[str, str]]:
    """A type's scripts as a website reads them (the query of docs/schema.md)."""
    conn = db if isinstance(db, sqlite3.Connection) else sqlite3.connect(db)
    return conn.execute(
        "select script_type, content from meta_scripts where type = ? order by position",
        (type_name,),
    ).fetchall()


def served(emu: Emulator, type_name: str) -> list[tuple[str, str]]:
    return [(s["type"], s["content"]) for s in emu.scripts(type_name)]


def deal(rid: int) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": "deals",
        "attributes": {"title": "t", "updated_at": "2026-01-01T00:00:00.000Z"},
    }


async def test_backfill_holds_each_types_scripts_in_order(
    make_emulator: Any, tmp_path: Path
) -> None:
    """After a backfill, each type's scripts are those the emulator serves for it, in order,
    with the type's channel; types that share a script each hold it."""
    async with make_emulator(resources=300, seed=7) as emu:
        emu.app.changing_scripts = True
        assert served(emu, "deals") != served(emu, "articles")
        db = tmp_path / "m.db"
        await backfill(emu, db)
        conn = sqlite3.connect(db)
        listed = {r[0] for r in conn.execute("select distinct type from meta_scripts")}
        assert listed == set(catalogue.LISTABLE)
        for name in catalogue.LISTABLE:
            assert held(conn, name) == served(emu, name), name
            channels = {
                r[0]
                for r in conn.execute("select channel from meta_scripts where type = ?", (name,))
            }
            assert channels == {catalogue.TYPES[name].channel}
        shared = SCRIPTS[0]["content"]  # served for every type
        assert conn.execute(
            "select count(*) from meta_scripts where content = ?", (shared,)
        ).fetchone()[0] == len(catalogue.LISTABLE)


async def test_a_dropped_script_goes_from_its_type_only(make_emulator: Any, tmp_path: Path) -> None:
    """The emulator drops a deals script: the next poll of deals removes it from the mirror
    (the others keep their place and first_seen_at); every other type keeps its scripts. An
    empty list served for articles, read by a fetch, removes all of theirs."""
    async with make_emulator(resources=300, seed=7) as emu:
        emu.app.changing_scripts = True
        db = tmp_path / "m.db"
        settings = await backfill(emu, db)
        before = {name: served(emu, name) for name in catalogue.LISTABLE}
        own = "window.contentType = 'deals';"
        deals = emu.scripts("deals")
        emu.set_scripts("deals", [s for s in deals if s["content"] != own])
        mirror = Mirror.open(db)
        try:
            first = dict(
                mirror.conn.execute(
                    "select content, first_seen_at from meta_scripts where type = 'deals'"
                ).fetchall()
            )
            async with ChannelClient(settings.upstream) as client:
                poller = Poller(client, mirror, page_size=100, overlap=5.0)
                for scope in scopes_of(DEALS, []):
                    await poller.poll_scope(scope)
                assert (
                    mirror.conn.execute(
                        "select count(*) from meta_scripts where content = ?", (own,)
                    ).fetchone()[0]
                    == 0
                )
                assert held(mirror.conn, "deals") == served(emu, "deals") != before["deals"]
                kept = mirror.conn.execute(
                    "select content, first_seen_at from meta_scripts where type = 'deals'"
                ).fetchall()
                assert all(first[c] == f for c, f in kept)

                emu.set_scripts("articles", [])
                await Evidence(client, mirror).fetch_and_write(
                    scopes_of(ARTICLES, []), [int(emu.ids("articles")[0])]
                )
        finally:
            mirror.close()
        assert held(db, "articles") == []
        for name in catalogue.LISTABLE:
            if name not in ("deals", "articles"):
                assert held(db, name) == before[name], name


def test_no_scripts_key_leaves_them_and_an_empty_list_removes_them(tmp_path: Path) -> None:
    """A response without meta.scripts says nothing of them; `[]` says there are none; a list
    in another order is stored in that order; another type's response touches only its own."""
    m = Mirror.open(tmp_path / "m.db")
    try:
        write_page(m, DEALS, [deal(1)], scripts=[A, B])
        write_page(m, ARTICLES, [], scripts=[C])
        write_page(m, DEALS, [deal(2)])
        assert held(m.conn, "deals") == [("text/javascript", "a()"), B_ROW]
        write_page(m, DEALS, [deal(3)], scripts=[B, A])
        assert held(m.conn, "deals") == [B_ROW, ("text/javascript", "a()")]
        write_page(m, DEALS, [], scripts=[])
        assert held(m.conn, "deals") == []
        assert held(m.conn, "articles") == [("text/javascript", "c()")]
    finally:
        m.close()


def test_the_same_list_again_is_not_rewritten_per_type(tmp_path: Path) -> None:
    """Every page of a listing carries the same list: pages of two types interleaved (a
    backfill's) write each type's once, not once a page."""
    m = Mirror.open(tmp_path / "m.db")
    statements: list[str] = []
    m.conn.set_trace_callback(statements.append)
    try:
        write_page(m, DEALS, [deal(1)], scripts=[A, B])
        write_page(m, ARTICLES, [], scripts=[C])
        first = [s for s in statements if "meta_scripts" in s]
        statements.clear()
        for rid in range(2, 6):
            write_page(m, DEALS, [deal(rid)], scripts=[A, B])
            write_page(m, ARTICLES, [], scripts=[C])
            m.write_scripts(ARTICLES, [C])
        assert first and not [s for s in statements if "meta_scripts" in s]
        write_page(m, DEALS, [deal(9)], scripts=[A])  # another list: written at once
        assert held(m.conn, "deals") == [("text/javascript", "a()")]
    finally:
        m.close()


async def test_invalid_items_are_skipped_with_a_log_line(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Items that are not objects are skipped (logged with type and position), the page and the
    other scripts written; a meta.scripts that is not a list leaves the type's scripts."""
    async with make_emulator(resources=300, seed=7) as emu:
        emu.set_scripts("deals", [A, "not an object", 7, None, C])
        db = tmp_path / "m.db"
        with capture_logs() as logs:
            await backfill(emu, db, types=["deals"])
        assert held(db, "deals") == [("text/javascript", "a()"), ("text/javascript", "c()")]
        skipped = [e for e in logs if e["event"] == "scripts.item_skipped"]
        assert {(e["type"], e["position"]) for e in skipped} == {
            ("deals", 1),
            ("deals", 2),
            ("deals", 3),
        }
        assert sqlite3.connect(db).execute("select count(*) from deals").fetchone()[0] > 0
    m = Mirror.open(db)
    try:
        with capture_logs() as logs:
            write_page(m, DEALS, [deal(1)], scripts="<script>x()</script>")
        assert held(m.conn, "deals") == [("text/javascript", "a()"), ("text/javascript", "c()")]
        assert [e["event"] for e in logs] == ["scripts.refused"]
    finally:
        m.close()


def test_an_older_mirror_is_migrated_on_open(tmp_path: Path) -> None:
    """The old table (one row per script of any type, merged, no order) is rebuilt: each script
    given to every type the mirror lists, in the order stored, until that type's next response."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE _sync_meta (key TEXT PRIMARY KEY, value TEXT);"
        "INSERT INTO _sync_meta VALUES ('schema_version', '1');"
        "CREATE TABLE _sync_backfill (type TEXT NOT NULL, scope TEXT NOT NULL, page_size INTEGER,"
        " last INTEGER, started_at TEXT, finished_at TEXT, PRIMARY KEY (type, scope));"
        "INSERT INTO _sync_backfill VALUES ('deals', 'filter[visibility]=Public', 100, 3, 'x', 'y');"
        "INSERT INTO _sync_backfill VALUES ('articles', '', 100, 3, 'x', 'y');"
        "CREATE TABLE meta_scripts (id TEXT PRIMARY KEY, type TEXT, content TEXT,"
        " first_seen_at TEXT, last_seen_at TEXT);"
    )
    for kind, content, stamp in [
        (C["type"], "c()", "2026-01-01"),
        (A["type"], "a()", "2026-02-01"),
    ]:
        sid = hashlib.sha1(f"{kind}\0{content}".encode()).hexdigest()
        conn.execute(
            "insert into meta_scripts values (?, ?, ?, ?, ?)", (sid, kind, content, stamp, stamp)
        )
    conn.commit()
    conn.close()

    m = Mirror.open(db)
    try:
        rows = m.conn.execute(
            "select type, channel, position, script_type, content, first_seen_at"
            " from meta_scripts order by type, position"
        ).fetchall()
        assert rows == [
            ("articles", "editorial", 0, "text/javascript", "c()", "2026-01-01"),
            ("articles", "editorial", 1, "text/javascript", "a()", "2026-02-01"),
            ("deals", "deal", 0, "text/javascript", "c()", "2026-01-01"),
            ("deals", "deal", 1, "text/javascript", "a()", "2026-02-01"),
        ]
        write_page(m, DEALS, [deal(1)], scripts=[A])
        assert held(m.conn, "deals") == [("text/javascript", "a()")]
        assert held(m.conn, "articles") == [("text/javascript", "c()"), ("text/javascript", "a()")]
        assert m.meta.get("schema_version") == "2"
    finally:
        m.close()
    Mirror.open(db).close()  # opening again is a no-op


async def test_emulator_serves_per_type_scripts_on_the_switch(emulator: Emulator) -> None:
    """Off: one list for every type. On: each type its own; `PUT /_emulator/scripts/{type}`
    changes one type's from the next response on, the others untouched."""
    same = emulator.scripts("deals")
    assert all(emulator.scripts(t) == same for t in catalogue.LISTABLE)
    async with aiohttp.ClientSession() as http:
        base = f"{emulator.base_url}/_emulator"
        async with http.patch(f"{base}/settings", json={"changing_scripts": True}) as resp:
            assert (await resp.json())["changing_scripts"] is True
        lists = [emulator.scripts(t) for t in catalogue.LISTABLE]
        assert len({repr(x) for x in lists}) == len(lists)
        async with http.put(f"{base}/scripts/deals", json=[C]) as resp:
            assert resp.status == 200 and await resp.json() == [C]
    settings = settings_for(emulator, Path("unused.db"))
    async with ChannelClient(settings.upstream) as client:
        deals = await client.list_page(Scope(DEALS, None, {"filter[visibility]": "Public"}), 1)
        articles = await client.list_page(Scope(ARTICLES), 1)
    assert deals.meta["scripts"] == [C]
    assert articles.meta["scripts"] == emulator.scripts("articles") != [C]
