"""A giant notice batch never starves the notices after it (#50), against the daemon, the
emulator and real SQLite, at the request budget the issue was found at (20 requests a second).

A batch of 100,000 article ids and one of 9,999 ids the upstream does not have are queued
(about 1,100 `filter[id]` requests, a minute at the budget); a real change notified right after
lands within 8 s, while the big ones still drain. The measured time is printed (`pytest -s`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from sync.emulator import Emulator
from sync.readers.backlog import queue_line
from sync.readers.status import status_data
from tests.support.daemon import running
from tests.support.hostile import snapshot
from tests.support.settings import SECRET
from tests.support.settings import daemon_settings as settings_for
from tests.support.waiting import eventually


def _batch(ids: range) -> bytes:
    items: list[dict[str, Any]] = [
        {"type": "updates", "attributes": {"resource_type": "articles", "resource_id": i}}
        for i in ids
    ]
    return orjson.dumps({"data": items})


async def test_a_notice_after_a_100000_item_batch_is_in_the_mirror_within_8_s(
    emulator: Emulator, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=True, upstream={"max_requests_per_second": 20})
    async with running(settings) as daemon:
        url = f"http://127.0.0.1:{daemon.bound_port}/webhooks/{SECRET}"
        async with aiohttp.ClientSession() as http:
            for body in (_batch(range(1, 100_001)), _batch(range(7_000_001, 7_010_000))):
                async with http.post(
                    url, data=body, headers={"Content-Type": "application/json"}
                ) as r:
                    assert r.status == 202
            again = _batch(range(1, 100_001))  # sent again: costs no new work
            async with http.post(
                url, data=again, headers={"Content-Type": "application/json"}
            ) as r:
                assert r.status == 202
        assert daemon.running.queue.depth() <= 109_999
        shown = status_data(db, max_per_second=20)
        print("\n" + queue_line(shown))
        # a lane per delivery, 100 ids a request: 1,000 + 100 requests, 55 s at 20 a second
        assert shown["queue_requests"] <= 1_100 and shown["queue_drain_s"] <= 55.0
        assert shown["queue_drain_s"] == round(shown["queue_requests"] / 20, 1)
        article = emulator.ids("articles")[0]
        start = time.monotonic()
        emulator.update("articles", article, {"title": "behind the giant batch"})

        def landed() -> bool:
            rows = snapshot(db)["articles"]
            return any(r[0] == int(article) and "behind the giant batch" in r for r in rows)

        await eventually(landed, timeout=8)
        took = time.monotonic() - start
        left = daemon.running.queue.depth()
    print(f"\nnotice behind a 100,000-item batch: in the mirror after {took:.2f} s ({left} left)")
    assert left > 50_000  # served beside the big batch, not after it
