"""Backfill throughput beside the bare limit pipeline, in one run, printed as a ratio.

The emulator serves N resources in its own process. Then, one after the other, each in its own
process so peak RSS (in MB, the process with its children) is its own:
  limit  aiohttp download of every page `sync` lists (same routes, page size, includes, trimmed
         sideloads (`catalogue.sideload_trim`) and concurrency) + orjson parse + one prepared `executemany` per page into SQLite (id and
         the attributes as one JSON blob): what this machine can do with no mirror logic at all;
  sync   `ccsync backfill` (columns per attribute, links, included rows, guards, checkpoints,
         the missed-row pass and the hours), with its default page worker process: sync
         parses on the second core, the limit in its one process (both share the machine's
         two cores with the emulator).
With --repeat K (default 3) the two run alternately K times each and the best run of each is
compared: on a shared machine a neighbour's burst slows one run, never speeds one up, so the
best of several is the fairest reading of each pipeline (every run is printed too; peak RSS is
the worst run's).
The emulator keeps the page bodies it serves (`ccsync emulator --page-cache-mb`; here
`--emulator-cache-mb`, default 4096, 0 for off), so after the first round it costs the machine
little CPU, as a real upstream on its own servers would (see `_common.EMULATOR_CACHE_MB`).
Run:
    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/backfill_vs_limit.py [--n 200000] [--concurrency 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3

from _common import (
    JSONAPI_HEADERS,
    add_emulator_args,
    alternate,
    emulator,
    last_page,
    limit_backfill,
    list_params,
    login_bytes,
    signed,
    sync_backfill,
)


async def limit_pipeline(base: str, db: str, concurrency: int) -> int:
    """The bare pipeline; returns rows written."""
    import aiohttp
    import orjson

    from sync.model import catalogue

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for t in catalogue.LISTABLE:
        conn.execute(f"CREATE TABLE IF NOT EXISTS [{t}] (id INTEGER PRIMARY KEY, doc TEXT)")
    sem = asyncio.Semaphore(concurrency)
    rows = 0
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{base}/accounts/login", data=login_bytes(), headers=JSONAPI_HEADERS
        ) as r:
            token = (await r.json(content_type=None))["data"]["attributes"]["authentication_token"]

        async def page(path: str, params: dict[str, str], table: str) -> int:
            nonlocal rows
            async with sem:  # sign inside the limit: a signature queued too long goes stale
                q = {**params, **signed(token)}
                async with http.get(f"{base}{path}", params=q) as r:
                    raw = await r.read()
            doc = orjson.loads(raw)
            data = doc["data"]
            conn.execute("BEGIN")
            conn.executemany(
                f"INSERT OR REPLACE INTO [{table}] (id, doc) VALUES (?, ?)",
                [(int(d["id"]), orjson.dumps(d["attributes"])) for d in data],
            )
            conn.execute("COMMIT")
            rows += len(data)
            return last_page(doc)

        async def listing(
            rtype: catalogue.ResourceType, mall: int | None, scope: dict[str, str]
        ) -> None:
            params = list_params(rtype, scope)
            path = rtype.list_path(mall)
            last = await page(path, {**params, "page[number]": "1"}, rtype.name)
            await asyncio.gather(
                *(
                    page(path, {**params, "page[number]": str(n)}, rtype.name)
                    for n in range(2, last + 1)
                )
            )

        await listing(catalogue.TYPES["malls"], None, {})
        malls = [r[0] for r in conn.execute("SELECT id FROM malls")]
        jobs = []
        for name in catalogue.LISTABLE:
            rtype = catalogue.TYPES[name]
            if name == "malls":
                continue
            for mall in malls if rtype.level == "mall" else [None]:
                for scope in rtype.scope_params:
                    jobs.append(listing(rtype, mall, dict(scope)))
        await asyncio.gather(*jobs)
    conn.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_emulator_args(ap)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each")
    ap.add_argument("--limit-only", metavar="BASE", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.limit_only:
        print(asyncio.run(limit_pipeline(a.limit_only, a.db, a.concurrency)))
        return
    env = dict(os.environ)
    with emulator(a.n, env, a.emulator_cache_mb) as base:
        runs = alternate(
            {
                "limit": lambda tmp: limit_backfill(base, tmp, a.concurrency, env),
                "sync": lambda tmp: sync_backfill(base, tmp, a.concurrency, env),
            },
            a.repeat,
        )
    limit_rows, limit_s, _ = min(runs["limit"], key=lambda r: r[1])
    sync_rows, sync_s, _ = min(runs["sync"], key=lambda r: r[1])
    limit_rss = max(r[2] for r in runs["limit"])  # memory: the worst run, not the best
    sync_rss = max(r[2] for r in runs["sync"])
    limit_rate, sync_rate = limit_rows / limit_s, sync_rows / sync_s
    print(
        f"backfill vs limit: {a.n:,} resources served, concurrency {a.concurrency}, "
        f"best of {a.repeat} alternating runs each"
    )
    print(f"{'pipeline':<10}{'rows':>10}{'seconds':>10}{'rows/s':>10}{'peak RSS MB':>14}")
    print(f"{'limit':<10}{limit_rows:>10,}{limit_s:>10.1f}{limit_rate:>10,.0f}{limit_rss:>14.0f}")
    print(f"{'sync':<10}{sync_rows:>10,}{sync_s:>10.1f}{sync_rate:>10,.0f}{sync_rss:>14.0f}")
    print(
        f"ratio sync/limit throughput: {sync_rate / limit_rate:.2f} (goal >= 0.9); sync peak RSS {sync_rss:.0f} MB (goal < 150 MB at 1M; RSS of sync and its page worker together)"
    )


if __name__ == "__main__":
    main()
