"""The page pool: pages staged in a worker process come back exactly as staged in-process, a bad
page is refused with its URL, and a dead worker or a dead parent loses nothing and leaves nothing
running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from sync.channel.client import ChannelClient
from sync.core.errors import BadResponseError
from sync.emulator import Emulator
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline import batches, encoding, pagepool, pageworker, staging
from sync.pipeline.pagepool import PagePool
from sync.pipeline.seen import Seen, SeenTable, Sent, written_already
from sync.pipeline.staging import stage_listing
from tests.support.paths import ROOT
from tests.support.settings import make_settings


async def _bodies(emu: Emulator, tmp_path: Path) -> list[tuple[str, bytes, int | None]]:
    """A few real listing pages, raw: a top-level type and a mall-scoped one with includes."""
    settings = make_settings(emu, tmp_path / "unused.db")
    out = []
    async with ChannelClient(settings.upstream) as client:
        mall = int(sorted(emu.ids("malls"), key=int)[0])
        for name, mall_id in (("deals", None), ("stores", mall), ("articles", None)):
            resp = await client.list_response(Scope(catalogue.TYPES[name], mall_id), 1)
            out.append((name, resp.body, mall_id))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a dead parent's init) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


async def test_worker_stages_exactly_as_in_process(emulator: Emulator, tmp_path: Path) -> None:
    pages = await _bodies(emulator, tmp_path)
    async with PagePool(1) as pool:
        assert pool._procs and not pool._procs[0].gone  # a real worker process
        for name, body, mall in pages:
            got = await pool.stage(name, body, number=1, url="http://x/", status=200, mall_id=mall)
            want = stage_listing(name, body, number=1, url="", status=200, mall_id=mall)
            assert got.ticket  # the worker's number for it (`Sent`)
            got.ticket = 0
            assert got == want  # none of these pages was reported written: nothing left out
            assert got.resources > 0 and got.batches[0].rows
        assert not pool._procs[0].gone


async def test_worker_leaves_out_the_skipped_included_types(
    emulator: Emulator, tmp_path: Path
) -> None:
    name, body, mall = (await _bodies(emulator, tmp_path))[0]  # deals, with stores included
    whole = stage_listing(name, body, number=1, url="", status=200, mall_id=mall)
    assert "stores" in [b.type for b in whole.batches]
    async with PagePool(1) as pool:
        got = await pool.stage(
            name, body, number=1, url="u", status=200, mall_id=mall, skip=("stores",)
        )
    assert not pool._procs  # closed
    assert [b.type for b in got.batches] == [b.type for b in whole.batches if b.type != "stores"]
    assert got.batches[0] == whole.batches[0]  # the deals and their links are untouched
    assert got.batches[0].links["stores"]


def _page(deal: int, images: list[tuple[int, str]]) -> bytes:
    """A deals page of one deal and its images (id, updated_at), as the upstream sends it."""
    doc = {
        "data": [
            {
                "id": str(deal),
                "type": "deals",
                "attributes": {"title": f"deal {deal}", "updated_at": "2026-01-01T00:00:00.000Z"},
                "relationships": {
                    "images": {"data": [{"id": str(i), "type": "images"} for i, _ in images]}
                },
            }
        ],
        "included": [
            {"id": str(i), "type": "images", "attributes": {"url": f"/{i}.jpg", "updated_at": v}}
            for i, v in images
        ],
    }
    return json.dumps(doc).encode()


def _images(page: batches.StagedPage) -> list[int]:
    return [i for b in page.batches[1:] if b.type == "images" for i in b.ids]


async def test_worker_sends_an_included_row_once_it_is_written() -> None:
    v1, v2 = "2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"
    async with PagePool(1) as pool:

        async def stage(deal: int, images: list[tuple[int, str]]) -> batches.StagedPage:
            body = _page(deal, images)
            return await pool.stage("deals", body, number=1, url="u", status=200, mall_id=None)

        first = await stage(1, [(10, v1), (11, v1)])
        assert _images(first) == [10, 11]
        # Not reported written (its task was cancelled, say): the next page carries them again.
        second = await stage(2, [(10, v1), (11, v1)])
        assert _images(second) == [10, 11]
        pool.written(second)
        # Written: left out, unless the copy is another version; a new image comes as ever.
        third = await stage(3, [(10, v1), (11, v2), (12, v1)])
        assert _images(third) == [11, 12]
        assert third.batches[0].links["images"] == [(3, [10, 11, 12])]  # links stay whole
        pool.written(third)
        fourth = await stage(4, [(10, v1), (11, v2), (12, v1)])
        assert _images(fourth) == []


async def test_a_backed_up_worker_leaves_the_next_page_to_this_process() -> None:
    """With `here_at` pages waiting at the worker, the next page is staged here, exactly as the
    worker would, less the included rows the writer's memo (`memo`) holds."""
    v1 = "2026-01-01T00:00:00.000Z"
    async with PagePool(1, here_at=2) as pool:
        pool.memo = Seen(100)
        pool.memo.add("images", [10], [v1])
        bodies = [_page(d, [(10, v1), (20 + d, v1)]) for d in (1, 2, 3)]
        pages = await asyncio.gather(
            *(pool.stage("deals", b, number=1, url="u", status=200, mall_id=None) for b in bodies)
        )
        assert pool.staged_here == 1  # the third: two were waiting at the worker
        assert [p.ticket > 0 for p in pages] == [True, True, False]
        # The worker was told of nothing written: it sends image 10; here the memo holds it.
        assert [_images(p) for p in pages] == [[10, 21], [10, 22], [23]]
        for page, body in zip(pages, bodies, strict=True):
            want = stage_listing("deals", body, number=1, url="", status=200, mall_id=None)
            assert page.batches[0] == want.batches[0]  # the deal and all its links, whole
        # With the queue short again, pages go to the worker.
        again = await pool.stage("deals", bodies[0], number=1, url="u", status=200, mall_id=None)
        assert again.ticket > 0 and pool.staged_here == 1


async def test_a_worker_with_answers_unread_gets_the_next_page() -> None:
    """Pages waiting at a worker whose answers sit unread (this process was busy writing) do
    not make it backed up: the next page still goes to it."""
    v1 = "2026-01-01T00:00:00.000Z"
    async with PagePool(1, here_at=2) as pool:
        bodies = [_page(d, [(20 + d, v1)]) for d in (1, 2, 3)]
        sent = [
            asyncio.ensure_future(
                pool.stage("deals", b, number=1, url="u", status=200, mall_id=None)
            )
            for b in bodies[:2]
        ]
        await asyncio.sleep(0)  # both requests written to the worker
        worker = pool._procs[0]
        deadline = time.monotonic() + 10
        while not worker.answered() and time.monotonic() < deadline:
            time.sleep(0.01)  # blocking, as a long SQLite write blocks the event loop
        time.sleep(0.2)
        assert worker.answered() and len(worker.waiting) == 2
        third = await pool.stage("deals", bodies[2], number=1, url="u", status=200, mall_id=None)
        assert third.ticket > 0 and pool.staged_here == 0
        assert [p.ticket > 0 for p in await asyncio.gather(*sent)] == [True, True]


V = "2026-01-01T00:00:00.000Z"


def test_sent_forgets_pages_never_written_and_stays_bounded() -> None:
    sent = Sent()
    for ticket in range(1, sent.PENDING + 10):
        page = staging.stage_listing(
            "deals", _page(ticket, [(ticket, V)]), number=1, url="", status=200, mall_id=None
        )
        sent.filter(page, ticket)
    assert len(sent.pending) == sent.PENDING and 1 not in sent.pending
    sent.confirm([1, sent.PENDING + 5])  # 1 was forgotten: it stays unsent-as-written
    assert len(sent.written) == 1 and sent.written.holds("images", sent.PENDING + 5, V)
    assert sent.written.version_of("images", 1) is None


def test_answers_cross_the_pipe_whole() -> None:
    """`to_wire`/`from_wire` give back every field of a page (tuples stay tuples, digests stay
    bytes, a batch without versions stays without) and a refusal with its hint."""
    tag = {"id": "7", "type": "tags", "attributes": {"name": "shoes", "big": 2**70}}
    image = {"id": "10", "type": "images", "attributes": {"updated_at": V, "ok": True}}
    page = staging.stage_listing(
        "deals",
        json.dumps(
            {
                "data": [{"id": "1", "type": "deals", "attributes": {"updated_at": "bad"}}],
                "included": [tag, image],
                "meta": {"scripts": [{"src": "/a.js"}]},
                "links": {"last": "/deals?page[number]=3"},
            }
        ).encode(),
        number=2,
        url="",
        status=200,
        mall_id=None,
    )
    page.ticket = 9
    back = pageworker.from_wire(pageworker.to_wire(page))
    problem = page.batches[0].refused[0][3]
    assert back == page and back.batches[0].refused == [(1, "updated_at", '"bad"', problem)]
    assert isinstance(back.batches[1].rows[0], tuple) and back.batches[0].versions is None
    assert any(isinstance(v, bytes) for b in back.batches for v in b.versions or ())
    refused = pageworker.Refused("not JSON", "check the upstream")
    assert pageworker.from_wire(pageworker.to_wire(refused)) == refused


def test_seen_is_exact_and_forgets_its_oldest_half_when_full() -> None:
    """`Seen` remembers versions exactly (a stamp kept as an int still tells one millisecond
    from the next; a digest, another stamp form), keeps types apart, refuses ids it cannot
    pack, and when full forgets the oldest half, keeping the rows most recently written."""
    seen = Seen(10)
    later = "2026-01-01T00:00:00.001Z"
    seen.add("images", [1, 2], [V, b"digest"])
    seen.add("tags", [1], ["2026-01-01T01:00:00+01:00"])
    assert seen.holds("images", 1, V) and not seen.holds("images", 1, later)
    assert seen.holds("images", 2, b"digest") and not seen.holds("images", 2, b"other")
    assert seen.holds("tags", 1, "2026-01-01T01:00:00+01:00") and not seen.holds("tags", 1, V)
    assert seen.version_of("groups", 1) is None and seen.version_of("nonsense", 1) is None
    seen.add("images", [-1, 2**60], [V, V])  # ids it cannot pack: never taken for written
    assert not seen.holds("images", -1, V) and not seen.holds("images", 2**60, V)
    assert seen.unwritten("images", [1, 2, 3], [V, b"x", V]) == [False, True, True]
    seen.forget("images", [1])
    assert seen.version_of("images", 1) is None
    seen.add("groups", range(100, 112), [V] * 12)  # over the limit: the oldest half goes
    assert len(seen) == 5  # 2 held + 12 new = 14 > 10: all but the 5 newest forgotten
    assert seen.holds("groups", 111, V) and seen.version_of("images", 2) is None


async def test_bad_page_is_refused_with_its_url_through_the_worker() -> None:
    async with PagePool(1) as pool:
        with pytest.raises(BadResponseError) as err:
            await pool.stage(
                "deals",
                b'{"data": [{"id": 1',
                number=3,
                url="http://up/deals",
                status=200,
                mall_id=None,
            )
        assert "not JSON" in str(err.value) and "http://up/deals" in str(err.value)
        with pytest.raises(BadResponseError, match="without a `data` list"):
            await pool.stage("deals", b'{"data": 5}', number=1, url="u", status=200, mall_id=None)
        # the worker survives a refused page and keeps answering
        ok = await pool.stage("deals", b'{"data": []}', number=1, url="u", status=200, mall_id=None)
        assert ok.resources == 0 and not pool._procs[0].gone


async def test_a_killed_worker_loses_no_page(emulator: Emulator, tmp_path: Path) -> None:
    pages = await _bodies(emulator, tmp_path)
    name, body, mall = pages[0]
    want = stage_listing(name, body, number=1, url="", status=200, mall_id=mall)
    with structlog.testing.capture_logs() as logs:
        async with PagePool(1) as pool:
            worker = pool._procs[0]
            os.kill(worker.proc.pid, signal.SIGKILL)
            await worker.proc.wait()
            results = await asyncio.gather(
                *(
                    pool.stage(name, body, number=1, url="u", status=200, mall_id=mall)
                    for _ in range(5)
                )
            )
    assert all(r == want for r in results)  # staged in-process instead
    lost = [e for e in logs if e["event"] == "pagepool.worker_lost"]
    assert len(lost) == 1 and "main process" in lost[0]["hint"]


async def test_worker_ignores_ctrl_c_and_exits_at_end_of_input() -> None:
    async with PagePool(1) as pool:
        proc = pool._procs[0].proc
        await asyncio.sleep(0.3)  # let it install its signal handlers
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGTERM)
        ok = await pool.stage("deals", b'{"data": []}', number=1, url="u", status=200, mall_id=None)
        assert ok.resources == 0
    assert proc.returncode == 0  # closed by the pool: end of input, clean exit


def test_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """`kill -9` of the main process must not leave a worker behind."""
    script = textwrap.dedent(
        """
        import asyncio, os, signal, sys
        from sync.pipeline.pagepool import PagePool

        async def main():
            async with PagePool(2) as pool:
                print(" ".join(str(w.proc.pid) for w in pool._procs), flush=True)
                await asyncio.sleep(0.3)
                os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Workers never re-run the caller's script (multiprocessing's spawn would)."""
    marker = tmp_path / "runs.txt"
    script = tmp_path / "embed.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            from sync.pipeline.pagepool import PagePool
            with open({str(marker)!r}, "a") as f:
                f.write("run\\n")

            async def main():
                async with PagePool(1) as pool:
                    page = await pool.stage("deals", b'{{"data": []}}', number=1, url="u",
                                            status=200, mall_id=None)
                    assert page.resources == 0 and not pool._procs[0].gone

            asyncio.run(main())
            """
        )
    )
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True, timeout=60)
    assert marker.read_text() == "run\n"


async def test_a_stuck_worker_is_stopped_and_its_pages_staged_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pagepool, "STALL_SECONDS", 0.5)
    with structlog.testing.capture_logs() as logs:
        async with PagePool(1) as pool:
            proc = pool._procs[0].proc
            os.kill(proc.pid, signal.SIGSTOP)  # alive, silent
            page = await asyncio.wait_for(
                pool.stage("deals", b'{"data": []}', number=1, url="u", status=200, mall_id=None),
                10,
            )
            assert page.resources == 0
            assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
    assert any("no answer" in e.get("reason", "") for e in logs)


async def test_a_worker_from_another_install_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """sync upgraded during a run: the new worker's framing may differ, so it must not answer."""
    monkeypatch.setattr(pagepool, "PROTOCOL", pageworker.PROTOCOL + 1)
    async with PagePool(1) as pool:
        proc = pool._procs[0].proc
        assert await asyncio.wait_for(proc.wait(), 10) == 3
        page = await pool.stage(
            "deals", b'{"data": []}', number=1, url="u", status=200, mall_id=None
        )
        assert page.resources == 0


@pytest.mark.parametrize("memo", [Seen, SeenTable])
def test_rows_written_already_are_left_out_before_staging_as_after(memo: type[Seen]) -> None:
    """`written_already` decides as `Sent.filter` would, with the version `stage` gives: by
    stamp, by hash for a type without `updated_at` (tags); a copy with a stamp staging would
    re-stamp or refuse is left to staging (a refusal is still reported). The same with the
    worker's memo in SQLite (`SeenTable`) as with the dict."""
    image = {"id": "10", "type": "images", "attributes": {"url": "/10.jpg", "updated_at": V}}
    tag = {"id": "7", "type": "tags", "attributes": {"name": "shoes"}}
    written = memo(100)
    written.add("images", [10], [V])
    written.add("tags", [7], [encoding.version(tag)])

    def already(res: dict[str, Any], name: str) -> bool:
        return written_already(res, written.version_of(name, int(res["id"])), written)

    assert already(image, "images")
    assert already(tag, "tags")
    renamed = {**tag, "attributes": {"name": "boots"}}
    assert not already(renamed, "tags")  # another copy: sent
    newer = {**image, "attributes": {"url": "/10.jpg", "updated_at": "2026-03-01T00:00:00.000Z"}}
    assert not already(newer, "images")
    bad = {**image, "attributes": {**image["attributes"], "created_at": "yesterday"}}  # type: ignore[dict-item]
    assert not already(bad, "images")
    assert not already({**image, "id": "11"}, "images")
    batches = staging.stage_resources(
        catalogue.TYPES["deals"], [], [image, tag, renamed, bad], written=written
    )
    staged = {b.type: (b.ids, [r[0] for r in b.refused]) for b in batches[1:]}
    assert staged == {"images": ([], [10]), "tags": ([7], [])}  # the refusal still reported


@pytest.mark.parametrize("memo", [Seen, SeenTable])
def test_the_memo_remembers_exactly_and_forgets_when_full(memo: type[Seen]) -> None:
    """Both memos: a row is written only as the very copy added (another version, type or id
    is not); `forget` and `clear` forget; past `limit` rows about half are forgotten, never
    a wrong version remembered."""
    seen = memo(1000)
    digest = encoding.version({"id": "7", "type": "tags", "attributes": {"name": "a"}})
    seen.add("images", [1, 2, 3], [V, V, "2026-01-01T00:00:00Z"])
    seen.add("tags", [1], [digest])
    assert seen.unwritten(
        "images", [1, 2, 3, 4], [V, "2026-02-01T00:00:00.000Z", "2026-01-01T00:00:00Z", V]
    ) == [False, True, False, True]
    assert seen.unwritten("tags", [1, 2], [digest, digest]) == [False, True]
    assert seen.unwritten("groups", [1], [digest]) == [True]
    assert seen.versions_of("images", [1, 4, None]) == {1: seen.form(V)}
    assert seen.holds("tags", 1, digest) and not seen.holds("tags", 1, digest[:-1] + b"x")
    seen.add("images", [2], ["2026-02-01T00:00:00.000Z"])  # a newer copy replaces the older
    assert seen.unwritten("images", [2, 2], [V, "2026-02-01T00:00:00.000Z"]) == [True, False]
    seen.forget("images", [1])
    assert seen.unwritten("images", [1, 3], [V, "2026-01-01T00:00:00Z"]) == [True, False]
    seen.add("images", list(range(10, 2010)), [V] * 2000)
    assert 0 < len(seen) <= 1000
    kept = [
        i
        for i, new in zip(
            range(10, 2010), seen.unwritten("images", range(10, 2010), [V] * 2000), strict=True
        )
        if not new
    ]
    assert 300 <= len(kept) <= 1000
    assert all(seen.holds("images", i, V) for i in kept[:50])
    seen.clear()
    assert len(seen) == 0 and seen.unwritten("tags", [1], [digest]) == [True]


def test_a_worker_memo_past_its_dict_size_moves_to_sqlite_holding_the_same_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Sent` keeps a dict up to `DICT_ROWS` rows, then an equal `SeenTable`: canonical stamps
    (held as ints in the dict), other stamp forms and digests all come back exact."""
    monkeypatch.setattr(Sent, "DICT_ROWS", 2)
    sent = Sent()
    digest = encoding.version({"id": "7", "type": "tags", "attributes": {"name": "a"}})
    copies = [("images", [1, 2], [V, "2026-01-01T00:00:00+01:00"]), ("tags", [7], [digest])]
    sent.pending[1] = copies[:1]
    sent.confirm([1])
    assert type(sent.written) is Seen
    sent.pending[2] = copies[1:]
    sent.confirm([2])
    assert type(sent.written) is SeenTable and len(sent.written) == 3
    for name, ids, versions in copies:
        assert sent.written.unwritten(name, ids, versions) == [False] * len(ids)
    assert sent.written.unwritten("images", [1], ["2026-01-01T00:00:00.001Z"]) == [True]
