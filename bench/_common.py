"""Helpers the backfill benchmarks share: the emulator in its own process, `ccsync backfill` measured
in its own process (seconds, peak RSS, rows), request signing and `links.last` parsing.

Scripts import it as `from _common import ...`: `python bench/<script>.py` puts bench/ on the path.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psutil

from sync.model import catalogue
from sync.model.catalogue import ResourceType

ROOT = Path(__file__).resolve().parent.parent
EMAIL, PASSWORD = "demo@example.com", "demo-password"
PAGE_SIZE = 100


def signed(token: str) -> dict[str, str]:
    """The three authentication query parameters; sign each request anew (30 s validity)."""
    ts = int(time.time())
    sig = hashlib.md5(f"{ts}:{token}".encode(), usedforsecurity=False).hexdigest()
    return {"auth_id": EMAIL, "auth_timestamp": str(ts), "auth_token": sig}


#: JSON:API request bodies carry the JSON:API media type; the emulator answers 415 to another.
JSONAPI_HEADERS = {"Content-Type": "application/vnd.api+json"}


def login_body() -> dict[str, object]:
    """The JSON body of POST /accounts/login for the demo account."""
    return {"data": {"type": "accounts", "attributes": {"email": EMAIL, "password": PASSWORD}}}


def login_bytes() -> bytes:
    """`login_body` encoded, to send with `JSONAPI_HEADERS`."""
    return json.dumps(login_body()).encode()


def last_page(doc: dict[str, object]) -> int:
    """The page number of a collection response's `links.last` (1 when absent)."""
    links = doc.get("links")
    last = links.get("last") if isinstance(links, dict) else None
    if not last:
        return 1
    return int(parse_qs(urlsplit(str(last)).query).get("page[number]", ["1"])[0])


def list_params(rtype: ResourceType, scope: dict[str, str]) -> dict[str, str]:
    """The query of one listing, as `ccsync backfill` of every listable type sends it (page number
    aside): the same includes, trimmed the same way (`catalogue.sideload_trim`)."""
    # In sync's order (`ChannelClient.query`): the emulator's page cache is keyed by
    # the query as sent, so the limit and sync read the same cached pages.
    params = {"page[size]": str(PAGE_SIZE), "page[number]": "1", "sort": "id"}
    if rtype.include:
        params["include"] = rtype.include
    params.update(scope)
    params.update(catalogue.trim_params(catalogue.sideload_trim(rtype, catalogue.LISTABLE)))
    return params


def count_rows(db: str | Path, tables: list[str] | tuple[str, ...]) -> int:
    """Rows in those of `tables` that exist in the SQLite file `db`."""
    conn = sqlite3.connect(db)
    try:
        have = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        return sum(
            conn.execute(f"select count(*) from [{t}]").fetchone()[0] for t in tables if t in have
        )
    finally:
        conn.close()


def tree_rss(proc: psutil.Process) -> int:
    """RSS of a process plus all its descendants (sync's page workers count, as do dlt's)."""
    total = 0
    with contextlib.suppress(psutil.Error):
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
    return total


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run `cmd`; return (seconds, peak RSS in MB (10**6 bytes) of it and its child processes together, stdout).

    Output goes to temporary files, not pipes: a child that writes more than a pipe holds would
    block until it is read, and it is read only at the end.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = psutil.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc))
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd} failed: {err.read().decode()[-2000:]}")
        return seconds, peak / 1e6, out.read().decode()


#: The emulator's page cache in the backfill benchmarks (`sync.emulator.pagecache`): a real
#: upstream runs on its own servers; ours shares the two cores with the pipelines measured, and
#: assembling pages cost it ~1 ms of CPU each, taken from them (from sync's two processes more
#: than from the one-process limit). With the cache, the first round fills it (the limit and
#: sync send the same queries and share pages; dlt's first run fills its own) and the best of
#: the runs compare warm runs: `--repeat` of at least 2.
EMULATOR_CACHE_MB = 4096


def add_emulator_args(ap: argparse.ArgumentParser) -> None:
    """The emulator options every backfill benchmark takes."""
    ap.add_argument("--n", type=int, default=200_000, help="resources served by the emulator")
    ap.add_argument(
        "--emulator-cache-mb",
        type=int,
        default=EMULATOR_CACHE_MB,
        help="MB of page bodies the emulator may cache (0: off, every page assembled anew)",
    )


@contextlib.contextmanager
def emulator(n: int, env: dict[str, str], cache_mb: int = 0) -> Iterator[str]:
    """Serve `n` resources from `ccsync emulator` in its own process; yield its base URL."""
    emu = subprocess.Popen(
        [
            *(sys.executable, "-m", "sync", "emulator", "--resources", str(n), "--port", "0"),
            *("--page-cache-mb", str(cache_mb)),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert emu.stdout is not None
    try:
        base = emu.stdout.readline().strip().rsplit(" ", 1)[1]
        emu.stdout.readline()
        yield base
    finally:
        emu.send_signal(signal.SIGTERM)
        rest, _ = emu.communicate()
        for line in rest.splitlines():
            if line.startswith("page cache:"):
                print(f"emulator {line}")


def backfill_config(base: str, tmp: str, concurrency: int, mirror: str) -> Path:
    """tmp/sync.toml for `ccsync backfill` of the emulator at `base`; `mirror` is the body of
    its `[mirror]` section (`path = ...`, or `url = ...` for PostgreSQL).

    The request budget is off (`max_requests_per_second = 0`): this measures the pipeline, as
    the limit does; the shipped budget (20/s) bounds what it asks of a real upstream.
    """
    cfg = Path(tmp) / "sync.toml"
    cfg.write_text(
        f'[upstream]\nbase_url = "{base}"\nemail = "{EMAIL}"\npassword_env = "BENCH_PW"\n'
        f"concurrency = {concurrency}\nmax_requests_per_second = 0\n"
        f"[mirror]\n{mirror}\n"
        '[logging]\nlevel = "warning"\nformat = "json"\n'
    )
    return cfg


def run_backfill(cfg: Path, env: dict[str, str]) -> tuple[float, float]:
    """`ccsync backfill --config cfg` in its own process: (seconds, peak RSS MB)."""
    seconds, rss, _ = measure(
        [sys.executable, "-m", "sync", "backfill", "--quiet", "--config", str(cfg)],
        {**env, "BENCH_PW": PASSWORD},
    )
    return seconds, rss


def sync_backfill(
    base: str, tmp: str, concurrency: int, env: dict[str, str]
) -> tuple[float, float, int]:
    """`ccsync backfill` of the emulator at `base` into tmp/sync.db: (seconds, peak RSS MB, rows).

    Rows are those of the listable types' tables (not the link, included-only or hours tables).
    """
    from sync.model import catalogue

    cfg = backfill_config(base, tmp, concurrency, f'path = "{tmp}/sync.db"')
    seconds, rss = run_backfill(cfg, env)
    return seconds, rss, count_rows(f"{tmp}/sync.db", catalogue.LISTABLE)


def limit_backfill(
    base: str, tmp: str, concurrency: int, env: dict[str, str]
) -> tuple[float, float, int]:
    """The bare limit pipeline of `backfill_vs_limit.py` into tmp/limit.db: (seconds, peak RSS MB, rows)."""
    script = str(ROOT / "bench" / "backfill_vs_limit.py")
    cmd = [sys.executable, script, "--limit-only", base, "--db", f"{tmp}/limit.db"]
    seconds, rss, out = measure([*cmd, "--concurrency", str(concurrency)], env)
    return seconds, rss, int(out.strip().splitlines()[-1])


#: One run of a pipeline into a temporary directory: (seconds, peak RSS MB, rows).
Runner = Callable[[str], tuple[float, float, int]]


def alternate(
    pipelines: dict[str, Runner], repeat: int
) -> dict[str, list[tuple[int, float, float]]]:
    """Run the pipelines one after the other, `repeat` rounds, each in a fresh temporary
    directory; print every run and return each pipeline's (rows, seconds, peak RSS MB) runs.

    On a shared machine a neighbour's burst slows one run, never speeds one up: the benchmarks
    compare the best run of each, and the worst run's memory.
    """
    runs: dict[str, list[tuple[int, float, float]]] = {name: [] for name in pipelines}
    for i in range(repeat):
        for name, run in pipelines.items():
            with tempfile.TemporaryDirectory() as tmp:
                secs, rss, rows = run(tmp)
            runs[name].append((rows, secs, rss))
            print(
                f"run {i + 1} {name:<6}{rows:>10,} rows {secs:8.1f} s {rows / secs:>8,.0f} rows/s",
                flush=True,
            )
    return runs
