"""Backfill throughput beside the bare limit pipeline, in one run, printed as a ratio.

The emulator serves N resources in its own process. Then, one after the other, each in its own
process so peak RSS is its own:
  limit  aiohttp download of every page `sync` lists (same routes, page size, includes and
         concurrency) + orjson parse + one prepared `executemany` per page into SQLite (id and
         the attributes as one JSON blob): what this machine can do with no mirror logic at all;
  sync   `sync backfill` (columns per attribute, links, included rows, guards, checkpoints,
         the missed-row pass and the hours).
With --repeat K (default 3) the two run alternately K times each and the best run of each is
compared: on a shared machine a neighbour's burst slows one run, never speeds one up, so the
best of several is the fairest reading of each pipeline (every run is printed too).
Run:
    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/backfill_vs_limit.py [--n 200000] [--concurrency 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
EMAIL, PASSWORD = "demo@example.com", "demo-password"


async def limit_pipeline(base: str, db: str, concurrency: int) -> int:
    """The bare pipeline; returns rows written."""
    import aiohttp
    import orjson

    from sync import catalogue

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for t in catalogue.LISTABLE:
        conn.execute(f"CREATE TABLE IF NOT EXISTS [{t}] (id INTEGER PRIMARY KEY, doc TEXT)")
    sem = asyncio.Semaphore(concurrency)
    rows = 0
    async with aiohttp.ClientSession() as http:
        body = {"data": {"type": "accounts", "attributes": {"email": EMAIL, "password": PASSWORD}}}
        async with http.post(f"{base}/accounts/login", json=body) as r:
            token = (await r.json(content_type=None))["data"]["attributes"]["authentication_token"]

        async def page(path: str, params: dict[str, str], table: str) -> int:
            nonlocal rows
            async with sem:  # sign inside the limit: a signature queued too long goes stale
                ts = int(time.time())
                sig = hashlib.md5(f"{ts}:{token}".encode(), usedforsecurity=False).hexdigest()
                q = {**params, "auth_id": EMAIL, "auth_timestamp": str(ts), "auth_token": sig}
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
            last = doc["links"]["last"]
            return (
                int(last.split("page%5Bnumber%5D=")[1].split("&")[0])
                if "%5B" in last
                else int(last.split("page[number]=")[1].split("&")[0])
            )

        async def listing(
            rtype: catalogue.ResourceType, mall: int | None, scope: dict[str, str]
        ) -> None:
            params = {"page[size]": "100", "sort": "id", **scope}
            if rtype.include:
                params["include"] = rtype.include
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
            for mall in malls if rtype.scope == "mall" else [None]:
                for scope in rtype.scope_params:
                    jobs.append(listing(rtype, mall, dict(scope)))
        await asyncio.gather(*jobs)
    conn.close()
    return rows


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run `cmd`; return (seconds, peak RSS MiB, stdout)."""
    t0 = time.perf_counter()
    proc = psutil.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=__import__("subprocess").PIPE,
        stderr=__import__("subprocess").PIPE,
    )
    peak = 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, proc.memory_info().rss)
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - t0, peak / 2**20, out.decode()


def run_once(
    name: str, base: str, concurrency: int, env: dict[str, str]
) -> tuple[int, float, float]:
    """One run of `name` ("limit" or "sync") into a fresh database: (rows, seconds, peak MiB)."""
    with tempfile.TemporaryDirectory() as tmp:
        if name == "limit":
            secs, rss, out = measure(
                [
                    sys.executable,
                    __file__,
                    "--limit-only",
                    base,
                    "--db",
                    f"{tmp}/limit.db",
                    "--concurrency",
                    str(concurrency),
                ],
                env,
            )
            return int(out.strip().splitlines()[-1]), secs, rss
        cfg = Path(tmp) / "sync.toml"
        cfg.write_text(
            f'[upstream]\nbase_url = "{base}"\nemail = "{EMAIL}"\npassword_env = "BENCH_PW"\n'
            f'concurrency = {concurrency}\n[mirror]\npath = "{tmp}/sync.db"\n'
            '[logging]\nlevel = "warning"\nformat = "json"\n'
        )
        secs, rss, _ = measure(
            [sys.executable, "-m", "sync", "backfill", "--quiet", "--config", str(cfg)],
            {**env, "BENCH_PW": PASSWORD},
        )
        from sync import catalogue

        conn = sqlite3.connect(f"{tmp}/sync.db")
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        rows = sum(
            conn.execute(f"select count(*) from [{t}]").fetchone()[0]
            for t in catalogue.LISTABLE
            if t in tables
        )
        conn.close()
        return rows, secs, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="resources served by the emulator")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each")
    ap.add_argument("--limit-only", metavar="BASE", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.limit_only:
        print(asyncio.run(limit_pipeline(a.limit_only, a.db, a.concurrency)))
        return
    env = dict(os.environ)
    emu = __import__("subprocess").Popen(
        [sys.executable, "-m", "sync", "emulator", "--resources", str(a.n), "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=__import__("subprocess").PIPE,
        text=True,
    )
    assert emu.stdout is not None
    base = emu.stdout.readline().strip().rsplit(" ", 1)[1]
    emu.stdout.readline()
    runs: dict[str, list[tuple[int, float, float]]] = {"limit": [], "sync": []}
    try:
        for i in range(a.repeat):
            for name in ("limit", "sync"):
                rows, secs, rss = run_once(name, base, a.concurrency, env)
                runs[name].append((rows, secs, rss))
                print(
                    f"run {i + 1} {name:<6}{rows:>10,} rows {secs:8.1f} s {rows / secs:>8,.0f} rows/s",
                    flush=True,
                )
    finally:
        emu.send_signal(signal.SIGTERM)
        emu.wait()
    limit_rows, limit_s, _ = min(runs["limit"], key=lambda r: r[1])
    sync_rows, sync_s, _ = min(runs["sync"], key=lambda r: r[1])
    limit_rss = max(r[2] for r in runs["limit"])  # memory: the worst run, not the best
    sync_rss = max(r[2] for r in runs["sync"])
    limit_rate, sync_rate = limit_rows / limit_s, sync_rows / sync_s
    print(
        f"backfill vs limit: {a.n:,} resources served, concurrency {a.concurrency}, "
        f"best of {a.repeat} alternating runs each"
    )
    print(f"{'pipeline':<10}{'rows':>10}{'seconds':>10}{'rows/s':>10}{'peak RSS MiB':>14}")
    print(f"{'limit':<10}{limit_rows:>10,}{limit_s:>10.1f}{limit_rate:>10,.0f}{limit_rss:>14.0f}")
    print(f"{'sync':<10}{sync_rows:>10,}{sync_s:>10.1f}{sync_rate:>10,.0f}{sync_rss:>14.0f}")
    print(
        f"ratio sync/limit throughput: {sync_rate / limit_rate:.2f} (goal >= 0.75); sync peak RSS {sync_rss:.0f} MiB (goal < 150 at 1M)"
    )


if __name__ == "__main__":
    main()
