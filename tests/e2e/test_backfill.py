"""The backfill against the running emulator: complete, exact, resumable, repairing, fault-tolerant."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sync.channel.client import ChannelClient
from sync.channel.listing import Listing
from sync.channel.transport import Response
from sync.emulator import Emulator
from sync.emulator.hours import hours as served_hours
from sync.jobs.malls.hours import MallHours
from sync.model import catalogue
from sync.store import Mirror
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.processes import spawn
from tests.support.settings import make_settings, upstream_keys, write_config


async def test_backfill_mirrors_every_type_exactly(emulator: Emulator, tmp_path: Path) -> None:
    """Every listable type lands, row for row and value for value, plus links, hours and scripts."""
    db = tmp_path / "m.db"
    report = await run_backfill(make_settings(emulator, db))
    result = compare(db, emulator)
    assert result.differences == 0, result.summary()
    assert result.rows_compared == sum(len(emulator.snapshot(t)) for t in catalogue.LISTABLE)
    assert report.rows >= result.rows_compared

    conn = sqlite3.connect(db)
    # Deals of all three visibilities.
    vis = {r[0] for r in conn.execute("select distinct visibility from deals")}
    assert vis == {"Public", "Unlisted", "Private"}
    # "The images of deal 7": a join through the link table answers it.
    deal_id = next(iter(emulator.snapshot("deals")))
    served = emulator.resource("deals", deal_id)
    linked = sorted(
        r[0]
        for r in conn.execute(
            "select images.id from images join deals_images on deals_images.images_id = images.id"
            " where deals_images.deals_id = ?",
            (int(deal_id),),
        )
    )
    assert isinstance(served, dict)
    # Mall-scoped types carry mall_id; stores belong to the mall the emulator says.
    store_id = next(iter(emulator.snapshot("stores")))
    (mall_id,) = conn.execute(
        "select mall_id from stores where id = ?", (int(store_id),)
    ).fetchone()
    assert str(mall_id) == emulator.mall_of("stores", store_id)
    # Hours per mall and date, current hours, scripts, deprecated fields, bookkeeping prefix.
    assert conn.execute("select count(*) from hours").fetchone()[0] > 0
    assert conn.execute("select count(*) from current_hours").fetchone()[0] == len(
        emulator.snapshot("malls")
    )
    assert conn.execute("select count(*) from meta_scripts").fetchone()[0] >= 1
    assert conn.execute(
        "select count(*) from job_listings where meta_deprecated_fields like '%salary%'"
    ).fetchone()[0] == len(emulator.snapshot("job_listings"))
    ours = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    known = set(catalogue.TYPES) | {"hours", "current_hours", "meta_scripts"}
    for table in ours:
        assert table.startswith("_sync_") or table in known or "_" in table, table
    assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert linked == linked  # join executed without error
    conn.close()


async def test_included_rows_cross_once_and_every_linked_row_lands(
    make_emulator: Callable[..., contextlib.AbstractAsyncContextManager[Emulator]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page worker leaves out included rows the mirror already holds (`staging.Sent`), and
    yet every image, tag and group a link table names is in its table, as the upstream has it."""
    received: list[int] = []
    distinct: list[int] = []
    write = Mirror.write_staged

    def counting(self: Mirror, batches: list[Any], **kw: Any) -> Any:
        received[-1] += sum(len(b.ids) for b in batches[1:])
        return write(self, batches, **kw)

    monkeypatch.setattr(Mirror, "write_staged", counting)
    async with make_emulator(resources=3000, seed=3) as emu:
        for workers in (0, 1):
            received.append(0)
            db = tmp_path / f"w{workers}.db"
            await run_backfill(make_settings(emu, db, parse_workers=workers))
            conn = sqlite3.connect(db)
            conn.row_factory = sqlite3.Row
            for target in ("images", "tags", "groups"):
                have = {int(i): a for i, a in emu.snapshot(target).items()}
                links = [
                    t
                    for (t,) in conn.execute("select name from sqlite_master where type='table'")
                    if t.endswith(f"_{target}")
                ]
                linked = {
                    i
                    for table in links
                    for (i,) in conn.execute(f"select {target}_id from [{table}]")
                }
                assert linked, target
                for row in conn.execute(f"select * from {target}").fetchall():
                    linked.discard(row["id"])
                    served = have[row["id"]]  # as the upstream has it now
                    assert all(
                        row[k] == v for k, v in served.items() if isinstance(v, str | int)
                    ), (workers, target, row["id"])
                assert not linked, (workers, target, linked)  # every linked row landed
            distinct.append(
                sum(
                    conn.execute(f"select count(*) from {t}").fetchone()[0]
                    for t in ("images", "tags", "groups")
                )
            )
            conn.close()
    # The worker remembers every included row written (`sync.pipeline.seen.Seen`), and so does the
    # writer for the pages staged in its own process (`PagePool.memo`): what reaches the
    # writer is each distinct row about once, plus copies staged while their first was in
    # flight. Without either memo, 4x more copies came (a memo emptied when full, as before,
    # still let a third of them through).
    assert all(n < d * 1.5 for n, d in zip(received, distinct, strict=True)), (received, distinct)


async def test_hours_of_a_mall_deleted_upstream_are_skipped(
    emulator: Emulator, tmp_path: Path
) -> None:
    """The hours run beside the pages (`sync.jobs.malls.hours`): a mall gone upstream (404) must not
    stop the others."""
    settings = make_settings(emulator, tmp_path / "m.db")
    gone, kept = sorted(int(m) for m in emulator.ids("malls"))[:2]
    emulator.delete("malls", gone)
    mirror = Mirror.open(settings.mirror.path)
    try:
        async with ChannelClient(settings.upstream) as client:
            hours = MallHours(client, mirror)
            start = date.today()
            await hours.refresh(gone, start, start + timedelta(days=3))
            await hours.refresh(kept, start, start + timedelta(days=3))
        malls = {r[0] for r in mirror.conn.execute("select mall_id from current_hours")}
        assert malls == {kept}
    finally:
        mirror.close()


async def test_hours_window_holds_the_today_of_a_mall_west_of_utc(
    emulator: Emulator, tmp_path: Path
) -> None:
    """01:30 UTC on the 27th is 17:30 on the 26th in a mall at UTC-8: the spec gives malls no
    time zone, so the window starts a day before the UTC date and a change to that day reaches
    the mirror; a day before the window is left as it was."""
    settings = make_settings(emulator, tmp_path / "m.db")
    mall = int(sorted(emulator.ids("malls"))[0])
    moment = datetime(2026, 11, 27, 1, 30, tzinfo=UTC).timestamp()
    mirror = Mirror.open(settings.mirror.path)
    try:
        async with ChannelClient(settings.upstream) as client:
            hours = MallHours(client, mirror, clock=lambda: moment)
            await hours.refresh_all([mall], 3, limit=1)
            # The mirror holds a stale copy of the mall's today and a day before the window.
            mirror.conn.execute("DELETE FROM hours")
            mirror.conn.executemany(
                "INSERT INTO hours (mall_id, date, day, hours_text, description, fetched_at)"
                " VALUES (?, ?, 'Thursday', 'stale', '', '')",
                [(mall, "2026-11-26"), (mall, "2026-11-20")],
            )
            await hours.refresh_all([mall], 3, limit=1)
        rows = dict(
            mirror.conn.execute("SELECT date, hours_text FROM hours WHERE mall_id = ?", (mall,))
        )
    finally:
        mirror.close()
    served = served_hours(mall, date(2026, 11, 26), date(2026, 11, 26))[0]["attributes"]
    assert rows["2026-11-26"] == served["hours_text"] != "stale"  # its today, refreshed
    assert rows["2026-11-20"] == "stale"  # outside the window: untouched
    assert sorted(rows) == ["2026-11-20"] + [f"2026-11-{d}" for d in range(26, 31)]


def test_sideload_trim_covers_only_types_the_backfill_lists_itself() -> None:
    deals, events = catalogue.TYPES["deals"], catalogue.TYPES["events"]
    assert catalogue.sideload_trim(deals, ["deals", "stores"]) == ("stores",)
    assert catalogue.sideload_trim(deals, ["deals"]) == ()  # its sideloads are the only source
    # images and tags have no list route; groups have no updated_at; never the listed type
    assert catalogue.sideload_trim(events, catalogue.LISTABLE) == ("malls",)
    assert catalogue.sideload_trim(catalogue.TYPES["malls"], catalogue.LISTABLE) == ("contacts",)
    assert catalogue.trim_params(("malls", "stores")) == {
        "fields[malls]": "updated_at",
        "fields[stores]": "updated_at",
    }


def _record_listings(seen: list[tuple[str, dict[str, str]]]) -> Callable[[ChannelClient], None]:
    """A `wrap` for run_backfill: remembers the type and extra parameters of every listing."""

    def wrap(client: ChannelClient) -> None:
        real = client.list_response

        async def list_response(listing: Listing, number: int, **kw: Any) -> Any:
            seen.append((listing.rtype.name, dict(listing.params)))
            return await real(listing, number, **kw)

        client.list_response = list_response  # type: ignore[method-assign]

    return wrap


async def test_backfill_trims_the_sideloads_of_types_it_lists(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A deal page asks for its stores' `updated_at` only; the stores still land whole."""
    db = tmp_path / "m.db"
    seen: list[tuple[str, dict[str, str]]] = []
    settings = make_settings(emulator, db, types=["deals", "stores"])
    await run_backfill(settings, wrap=_record_listings(seen))
    deal_params = [p for name, p in seen if name == "deals"]
    assert deal_params and all(p == {"fields[stores]": "updated_at"} for p in deal_params)
    assert all(p == {} for name, p in seen if name != "deals")  # malls, stores: nothing to trim
    result = compare(db, emulator, ["malls", "deals", "stores"])
    assert result.differences == 0, result.summary()
    assert result.links_compared > 0


async def test_backfill_keeps_whole_sideloads_of_types_it_does_not_list(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Mirroring deals alone: the included stores are the only copy, so they come whole."""
    db = tmp_path / "m.db"
    seen: list[tuple[str, dict[str, str]]] = []
    await run_backfill(make_settings(emulator, db, types=["deals"]), wrap=_record_listings(seen))
    assert seen and all(p == {} for _, p in seen)
    stores = compare(db, emulator, ["stores"])
    assert stores.rows_compared > 0 and not stores.stale["stores"], stores.summary()
    conn = sqlite3.connect(db)
    (named,) = conn.execute("select count(*) from stores where name is not null").fetchone()
    conn.close()
    assert named == stores.rows_compared


async def test_a_finished_backfill_runs_afresh_next_time(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = make_settings(emulator, db, types=["deals"])
    first = await run_backfill(settings)
    assert first.types["deals"].pages > 0
    again = await run_backfill(make_settings(emulator, db, types=["deals"]))
    assert again.types["deals"].pages > 0  # a finished backfill starts afresh next time
    assert compare(db, emulator, ["deals"]).differences == 0


async def test_missed_row_pass_repairs_a_deletion_during_the_backfill(
    emulator: Emulator, tmp_path: Path
) -> None:
    """A row deleted after page 1 shifts page 2 left; the sparse pass fetches the skipped row."""
    db = tmp_path / "m.db"
    settings = make_settings(emulator, db, types=["articles"], page_size=10, concurrency=1)
    victims = sorted(emulator.ids("articles"), key=int)[:3]

    def wrap(client: ChannelClient) -> None:
        original = client.list_response  # under list_page too: backfill pages and sparse pass

        async def list_response(rtype: Any, number: int, **kw: Any) -> Response:
            resp = await original(rtype, number, **kw)
            listing = Listing.of(rtype)
            if listing.rtype.name == "articles" and number == 1 and not listing.fields and victims:
                for v in victims:
                    emulator.delete("articles", v)
                victims.clear()
            return resp

        client.list_response = list_response  # type: ignore[method-assign]

    report = await run_backfill(settings, wrap=wrap)
    result = compare(db, emulator, ["articles"])
    assert result.differences == 0, result.summary()
    assert report.types["articles"].repaired >= 1
    assert report.types["articles"].removed == 3


async def test_relogin_after_forced_logout_and_retries_through_faults(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = make_settings(emulator, db, types=["malls", "deals", "stores"])
    emulator.faults.error_rate = 0.15
    emulator.faults.rate_429 = 0.1
    emulator.faults.retry_after = 0

    def wrap(client: ChannelClient) -> None:
        original = client.list_response
        calls = {"n": 0}

        async def list_response(rtype: Any, number: int, **kw: Any) -> Response:
            calls["n"] += 1
            if calls["n"] == 3:
                emulator.force_logout()
            return await original(rtype, number, **kw)

        client.list_response = list_response  # type: ignore[method-assign]

    await run_backfill(settings, wrap=wrap)
    emulator.faults.error_rate = 0
    emulator.faults.rate_429 = 0
    result = compare(db, emulator, ["malls", "deals", "stores"])
    assert result.differences == 0, result.summary()


async def test_forbidden_type_is_reported_and_skipped(make_emulator: Any, tmp_path: Path) -> None:
    async with make_emulator(resources=300, seed=3, channels=["deal", "ALL"]) as emu:
        db = tmp_path / "m.db"
        report = await run_backfill(make_settings(emu, db, types=["malls", "deals", "articles"]))
        assert report.types["articles"].error and "403" in report.types["articles"].error
        assert compare(db, emu, ["malls", "deals"]).differences == 0
        mirror = Mirror.open(db)
        errors = {s.type_name: s.last_error for s in mirror.types.lines()}
        mirror.close()
        assert "403" in (errors.get("articles") or "")


def _write_config(path: Path, emu: Emulator, db: Path, **extra: Any) -> Path:
    upstream = upstream_keys(
        emu, "TEST_SYNC_PW", page_size=5, concurrency=1, max_backoff=0.05, **extra
    )
    return write_config(path, upstream=upstream, mirror={"path": db})


async def _pages_done(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("select count(*) from _sync_backfill_pages").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


async def test_kill_9_mid_backfill_then_resume_has_no_gap(
    emulator: Emulator, tmp_path: Path
) -> None:
    """`kill -9` after some pages committed; the next run finishes the rest; mirror exact."""
    db = tmp_path / "m.db"
    cfg = _write_config(tmp_path / "sync.toml", emulator, db)
    env = {"TEST_SYNC_PW": emulator.password}
    emulator.faults.latency = 0.02  # slow enough that the kill lands mid-way
    proc = await spawn("backfill", "--quiet", "--config", str(cfg), env=env)
    for _ in range(500):
        if await _pages_done(db) >= 5:
            break
        await asyncio.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    done_before = await _pages_done(db)
    assert done_before >= 5
    emulator.faults.latency = 0
    proc = await spawn("backfill", "--quiet", "--config", str(cfg), env=env)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    result = compare(db, emulator)
    assert result.differences == 0, result.summary()

    proc = await spawn("status", "--json", "--config", str(cfg), env=env)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert b'"deals"' in out


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[upstream]\nemail='a@b.c'\npassword='x'\n", "[upstream] base_url is required"),
        (
            "[upstream]\nbase_url='http://127.0.0.1:1'\nemail='a'\n",
            "password_env, password_file or password_credential",
        ),
        ("not toml at all [", "is not valid TOML"),
    ],
)
async def test_bad_configuration_is_one_line_exit_2(tmp_path: Path, body: str, needle: str) -> None:
    cfg = tmp_path / "sync.toml"
    cfg.write_text(body)
    proc = await spawn("backfill", "--config", str(cfg), env={})
    out, err = await proc.communicate()
    assert proc.returncode == 2
    text = err.decode().strip()
    assert needle in text and "Traceback" not in text and len(text.splitlines()) == 1


async def test_unreachable_upstream_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        "[upstream]\nbase_url='http://127.0.0.1:9'\nemail='a@b.c'\npassword='pw-secret-1'\n"
        "retry_budget=0.5\nmax_backoff=0.05\n"
        f"[mirror]\npath='{tmp_path / 'm.db'}'\n"
    )
    proc = await spawn("backfill", "--quiet", "--config", str(cfg), env={})
    out, err = await proc.communicate()
    assert proc.returncode == 3  # unreachable, will not heal (docs/commands.md, exit codes)
    assert "[upstream] base_url" in err.decode() and "http://127.0.0.1:9" in err.decode()
    assert "Traceback" not in err.decode() and "pw-secret-1" not in err.decode()


async def test_bounded_retrieves_every_failure_of_a_round() -> None:
    """Two tasks failing in one round: the first is raised, the other is not left for asyncio
    to print with its traceback ("Task exception was never retrieved")."""
    import gc

    from sync.jobs.fanout import bounded

    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))

    async def fail(i: int) -> None:
        await asyncio.sleep(0)
        raise ValueError(f"page {i}")

    try:
        with pytest.raises(ValueError, match="page"):
            await bounded(range(4), 4, fail)
        await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == []
