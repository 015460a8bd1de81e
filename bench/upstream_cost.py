"""What the daemon costs the upstream, and how fresh the mirror stays, with the shipped defaults.

For each mall count: the emulator serves `--resources` resources in that many malls with
`--latency` seconds per request, in its own process; `ccsync backfill` fills a mirror (budget
off: the set-up, not measured); then `ccsync run` follows it with the shipped defaults (request
budget 20/s, poll and deletions every 60 s) and webhooks on, and this script measures:

- the request rate: the most requests the emulator served in any 1-second window while the
  daemon ran, beside the budget (`/_emulator/requests`);
- the idle rate: requests a minute over `--idle` seconds with nothing changing;
- the poll cycle's cost and the staleness bound without webhooks, as the daemon computes and
  logs them at start (`poll.cycle`);
- change -> mirror: creates, updates and deletes of every kind of type (top-level and
  mall-scoped), one a second, each timed from the upstream change to the row (or its absence)
  readable in the mirror file; p50 and p99 beside the 5 s goal;
- what a creation in a mall-scoped type costs: requests the emulator served during `--creations`
  such creations (each waited for), less the idle rate over the same time, per creation, beside
  the 10 request goal;
- webhooks off: the daemon restarted without its receiver, the same kinds of change, the slowest
  beside the staleness bound it logged.

With `--malls` including 200 (the issue's size), the per-mall path (the emulator not serving
`GET /malls?include=`: `sync` falls back to listing every mall, as it always did before) is
measured too, as today's numbers, unless `--no-fallback`.

First, what the rolling proof costs with the default `staleness_bound` at 200,000 and
1,000,000 rows, beside the polls and the verify (`bench/proof_cost.py`: arithmetic on the
emulator's data set, seconds); `--proof-only` prints that alone.

`--side-by-side` prints instead issue #47's figures in one bounded run, in process, in about a
minute (`bench/side_by_side.py`): idle requests an hour at 40, 200 and 1,000 malls where the
mall routes are the source of `malls_deals` (`bench/route_cost.py`; with `--before <tree>` the
same against older code), requests per mall-scoped creation at 1,000 malls on the per-mall path
(`bench/creation_cost.py`), and the proof's share of the budget at 200,000 and 1,000,000.

Run:  .venv/bin/python bench/upstream_cost.py [--malls 1000,200] [--resources 200000]
      [--latency 0.05] [--idle 125] [--changes 45] [--creations 10] [--no-fallback]
      [--proof-only]
      [--side-by-side [--before /tmp/before] [--route-resources 2000] [--polls 5]
       [--creation-malls 1000] [--creation-resources 20000] [--creations 10]]
It takes about 7 minutes per row on a 2-core machine (most of it waiting on purpose).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import proof_cost
import side_by_side

ROOT = Path(__file__).resolve().parent.parent
EMAIL, PASSWORD = "demo@example.com", "demo-password"
SECRET = "bench-secret-0123456789abcdef"
BUDGET = 20.0  # the shipped [upstream] max_requests_per_second
GOAL_P99_S = 5.0
GOAL_CREATION_REQUESTS = 10.0
#: Types changed: top-level ones and the five listed only per mall.
TOP = ["articles", "deals", "events", "mall_messages"]
MALL_ONLY = ["stores", "products", "programs", "press_releases", "social_feeds"]
#: The emulator places these in a mall (`mall_id` on create).
EMULATOR_MALL_SCOPED = {"events", "mall_messages", *MALL_ONLY}
#: What the issue measured before this work (an independent stand-in upstream, 200 malls,
#: 20 ms a request, requests one at a time).
BEFORE = (
    "before (issue #17, independent stand-in, 200 malls, 20 ms): poll cycle 55.6 s of its 60 s, "
    "idle ~665 requests/min, a store creation ~35 extra requests, p50 11 s (max 20 s)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Change:
    """One upstream change and the mirror state that shows it arrived."""

    kind: str
    rtype: str
    rid: int
    started: float
    stamp: str | None = None  # an update's new `updated_at`
    arrived: float | None = None

    def seen(self, conn: sqlite3.Connection) -> bool:
        try:
            row = conn.execute(
                f"SELECT updated_at FROM [{self.rtype}] WHERE id = ?", (self.rid,)
            ).fetchone()
        except sqlite3.OperationalError:
            return False
        if self.kind == "delete":
            return row is None
        if self.kind == "create":
            return row is not None
        return row is not None and row[0] is not None and row[0] >= (self.stamp or "")


@dataclass
class Row:
    """The figures of one scenario."""

    malls: int
    path: str
    peak: int = 0
    idle_per_min: float = 0.0
    cycle_requests: int = 0
    bound_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    missed: int = 0
    creation_cost: float = 0.0
    creation_raw: float = 0.0
    off_latencies: list[float] = field(default_factory=list)
    off_missed: int = 0
    backfill_s: float = 0.0


class Upstream:
    """The emulator in its own process, driven over its `/_emulator/` routes."""

    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http, self.base = http, base

    async def settings(self, **values: Any) -> None:
        async with self.http.patch(f"{self.base}/_emulator/settings", json=values) as r:
            assert r.status == 200, await r.text()

    async def traffic(self) -> dict[str, Any]:
        async with self.http.get(f"{self.base}/_emulator/requests") as r:
            return dict(await r.json())

    async def reset(self) -> None:
        async with self.http.delete(f"{self.base}/_emulator/requests") as r:
            assert r.status == 204

    async def change(self, kind: str, rtype: str, rid: int | None, mall: int | None) -> Change:
        url = f"{self.base}/_emulator/resources/{rtype}"
        t0 = time.monotonic()
        if kind == "create":
            body: dict[str, Any] = {"attributes": {}}
            if rtype in EMULATOR_MALL_SCOPED and mall is not None:
                body["mall_id"] = mall
            async with self.http.post(url, json=body) as r:
                doc = await r.json()
                assert r.status == 201, doc
            return Change(kind, rtype, int(doc["data"]["id"]), t0)
        assert rid is not None
        if kind == "delete":
            async with self.http.delete(f"{url}/{rid}") as r:
                assert r.status == 204, await r.text()
            return Change(kind, rtype, rid, t0)
        async with self.http.patch(f"{url}/{rid}", json={"attributes": {}}) as r:
            doc = await r.json()
            assert r.status == 200, doc
        return Change(kind, rtype, rid, t0, stamp=doc["data"]["attributes"]["updated_at"])


def bench_env() -> dict[str, str]:
    """The environment of every `ccsync` process: the password and webhook secret by name."""
    return {**os.environ, "BENCH_PW": PASSWORD, "BENCH_SECRET": SECRET}


def write_config(
    tmp: Path, base: str, *, budget: float, webhooks: bool, port: int, concurrency: int = 4
) -> Path:
    cfg = tmp / f"sync-{budget:g}-{int(webhooks)}.toml"
    cfg.write_text(
        f'[upstream]\nbase_url = "{base}"\nemail = "{EMAIL}"\npassword_env = "BENCH_PW"\n'
        f"max_requests_per_second = {budget}\nconcurrency = {concurrency}\n"
        f'[mirror]\npath = "{tmp}/mirror.db"\n'
        f"[webhooks]\nenabled = {'true' if webhooks else 'false'}\n"
        f'listen = "127.0.0.1:{port}"\nsecret_env = "BENCH_SECRET"\n'
        '[logging]\nlevel = "info"\nformat = "json"\n'
    )
    return cfg


class Daemon:
    """`ccsync run` in its own process, its JSON log in a file."""

    def __init__(self, cfg: Path, log: Path) -> None:
        self.cfg, self.log = cfg, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "sync", "run", "--config", str(self.cfg)),
                cwd=ROOT,
                env=bench_env(),
                stdout=out,
                stderr=out,
            )

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out

    async def wait_for(
        self, pred: Callable[[dict[str, Any]], bool], within: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for e in self.events():
                if pred(e):
                    return e
            if self.proc is None or self.proc.returncode is not None:
                raise SystemExit(f"the daemon exited:\n{self.log.read_text()[-3000:]}")
            await asyncio.sleep(0.2)
        raise SystemExit(f"timed out waiting in the daemon's log {self.log}")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 60)


def ids(db: Path, table: str) -> list[int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [int(r[0]) for r in conn.execute(f"SELECT id FROM [{table}]")]
    finally:
        conn.close()


async def changes(
    up: Upstream,
    db: Path,
    rng: random.Random,
    kinds: list[tuple[str, str]],
    *,
    spacing: float,
    within: float,
    wait_each: bool = False,
) -> list[Change]:
    """Make each (kind, type) change `spacing` s apart; wait until every one is in the mirror
    (or `within` s after the last); return them with their arrival times."""
    malls = ids(db, "malls")
    pool = {t: ids(db, t) for t in {t for _, t in kinds}}
    done: list[Change] = []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)

    async def settle(pending: list[Change], until: float) -> None:
        while pending and time.monotonic() < until:
            now = time.monotonic()
            for c in list(pending):
                if c.seen(conn):
                    c.arrived = now
                    pending.remove(c)
            await asyncio.sleep(0.02)

    try:
        pending: list[Change] = []
        for kind, rtype in kinds:
            rid = None
            if kind != "create":
                rid = pool[rtype].pop(rng.randrange(len(pool[rtype])))
            c = await up.change(kind, rtype, rid, rng.choice(malls))
            done.append(c)
            pending.append(c)
            if wait_each:
                await settle(pending, time.monotonic() + within)
            await settle(pending, time.monotonic() + spacing)
        await settle(pending, time.monotonic() + within)
    finally:
        conn.close()
    return done


def lat(cs: list[Change]) -> tuple[list[float], int]:
    got = [c.arrived - c.started for c in cs if c.arrived is not None]
    return got, sum(1 for c in cs if c.arrived is None)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


async def scenario(args: argparse.Namespace, malls: int, include: bool, rng: random.Random) -> Row:
    row = Row(malls, "GET /malls?include=" if include else "per mall (today)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        emu_log = tmp / "emulator.log"
        emu_cmd = [
            *(sys.executable, "-m", "sync", "emulator", "--port", "0", "--seed", "7"),
            *("--resources", str(args.resources), "--malls", str(malls)),
        ]
        with emu_log.open("wb") as out:
            emu = await asyncio.create_subprocess_exec(*emu_cmd, cwd=ROOT, stdout=out, stderr=out)
        try:
            base = ""
            for _ in range(6000):
                text = emu_log.read_text(errors="replace")
                if "serving" in text and "http://" in text:
                    base = text.split("http://", 1)[1].split()[0]
                    base = f"http://{base}"
                    break
                if emu.returncode is not None:
                    raise SystemExit(f"the emulator exited: {text[-2000:]}")
                await asyncio.sleep(0.1)
            async with aiohttp.ClientSession() as http:
                up = Upstream(http, base)
                await up.settings(latency=0.0, mall_includes=include)
                fill = write_config(tmp, base, budget=0, webhooks=False, port=free_port())
                t0 = time.monotonic()
                fill_log = tmp / "backfill.log"
                with fill_log.open("wb") as out:
                    fill_proc = await asyncio.create_subprocess_exec(
                        *(sys.executable, "-m", "sync", "backfill", "--quiet"),
                        *("--config", str(fill)),
                        cwd=ROOT,
                        env=bench_env(),
                        stdout=out,
                        stderr=out,
                    )
                if await fill_proc.wait() != 0:
                    raise SystemExit(f"ccsync backfill failed:\n{fill_log.read_text()[-3000:]}")
                row.backfill_s = time.monotonic() - t0
                await up.settings(latency=args.latency)
                db = tmp / "mirror.db"

                # Webhooks on, the shipped defaults.
                cfg = write_config(tmp, base, budget=BUDGET, webhooks=True, port=free_port())
                daemon = Daemon(cfg, tmp / "daemon.log")
                await daemon.start()
                try:
                    cycle = await daemon.wait_for(
                        lambda e: e.get("event") in ("poll.cycle", "poll.cycle_overruns"), 600
                    )
                    row.cycle_requests = int(cycle["requests"])
                    row.bound_s = float(cycle["staleness_bound_s"])
                    await daemon.wait_for(lambda e: e.get("event") == "daemon.ready", 600)
                    await daemon.wait_for(
                        lambda e: e.get("event") == "job.done" and e.get("job") == "poll",
                        row.bound_s + 120,
                    )
                    await up.reset()
                    started = time.time()
                    await asyncio.sleep(args.idle)
                    idle = (await up.traffic())["total"]
                    row.idle_per_min = idle / args.idle * 60
                    kinds = [
                        (k, t)
                        for _ in range(-(-args.changes // 27))
                        for t in TOP + MALL_ONLY
                        for k in ("create", "update", "delete")
                    ][: args.changes]
                    rng.shuffle(kinds)
                    cs = await changes(up, db, rng, kinds, spacing=1.0, within=60.0)
                    row.latencies, row.missed = lat(cs)
                    before = (await up.traffic())["total"]
                    t1 = time.monotonic()
                    created = [("create", MALL_ONLY[i % 5]) for i in range(args.creations)]
                    cs = await changes(
                        up, db, rng, created, spacing=0.5, within=60.0, wait_each=True
                    )
                    spent = (await up.traffic())["total"] - before
                    seconds = time.monotonic() - t1
                    row.creation_raw = spent / len(created)
                    row.creation_cost = max(
                        0.0, (spent - idle / args.idle * seconds) / len(created)
                    )
                    traffic = await up.traffic()
                    row.peak = max(
                        (s["total"] for s in traffic["seconds"] if s["second"] >= started),
                        default=0,
                    )
                finally:
                    await daemon.stop()

                # Webhooks off: polls and the deletions feed alone.
                cfg = write_config(tmp, base, budget=BUDGET, webhooks=False, port=free_port())
                daemon = Daemon(cfg, tmp / "daemon-off.log")
                await daemon.start()
                try:
                    await daemon.wait_for(lambda e: e.get("event") == "daemon.ready", 600)
                    await daemon.wait_for(
                        lambda e: e.get("event") == "job.done" and e.get("job") == "poll",
                        row.bound_s + 120,
                    )
                    kinds = [(k, t) for t in TOP + MALL_ONLY for k in ("create", "update")]
                    kinds += [("delete", t) for t in rng.sample(TOP + MALL_ONLY, 3)]
                    rng.shuffle(kinds)
                    cs = await changes(
                        up, db, rng, kinds, spacing=args.off_spacing, within=row.bound_s + 60
                    )
                    row.off_latencies, row.off_missed = lat(cs)
                    traffic = await up.traffic()
                    row.peak = max(
                        row.peak, max((s["total"] for s in traffic["seconds"]), default=0)
                    )
                finally:
                    await daemon.stop()
        finally:
            emu.send_signal(signal.SIGTERM)
            await asyncio.wait_for(emu.wait(), 60)
    return row


def report(rows: list[Row], args: argparse.Namespace, *, final: bool = True) -> None:
    """The table and the ratios (`final`: with the header and the figures from before)."""
    print(
        f"\n{'upstream cost' if final else 'measured'}: {args.resources:,} resources, {args.latency * 1000:.0f} ms a request, "
        f"shipped defaults (budget {BUDGET:g}/s, poll and deletions every 60 s)"
    )
    print(
        f"{'malls':>6} {'mall-scoped path':<20} {'peak/s':>6} {'idle/min':>8} {'cycle req':>9} "
        f"{'bound s':>7} {'p50 s':>6} {'p99 s':>6} {'missed':>6} {'req/creation':>12} "
        f"{'off max s':>9} {'off missed':>10}"
    )
    for r in rows:
        print(
            f"{r.malls:>6,} {r.path:<20} {r.peak:>6} {r.idle_per_min:>8.1f} {r.cycle_requests:>9,} "
            f"{r.bound_s:>7.1f} {pct(r.latencies, 50):>6.2f} {pct(r.latencies, 99):>6.2f} "
            f"{r.missed:>6} {r.creation_cost:>12.1f} "
            f"{max(r.off_latencies, default=float('nan')):>9.1f} {r.off_missed:>10}"
        )
    if final:
        print(BEFORE)
    for r in rows:
        off_max = max(r.off_latencies, default=float("nan"))
        print(
            f"ratios at {r.malls:,} malls, {r.path}: peak rate/budget {r.peak / BUDGET:.2f} "
            f"(<= 1); p99 change->mirror/goal {pct(r.latencies, 99) / GOAL_P99_S:.2f} (<= 1, "
            f"{len(r.latencies)} changes, {r.missed} not arrived in 60 s); requests per "
            f"mall-scoped creation/goal {r.creation_cost / GOAL_CREATION_REQUESTS:.2f} (<= 1; "
            f"{r.creation_raw:.1f} before subtracting the idle rate); webhooks off, slowest "
            f"change/staleness bound {off_max / r.bound_s:.2f} (<= 1, {r.off_missed} not "
            f"arrived); idle {r.idle_per_min:.1f} requests/min; backfill (budget off) "
            f"{r.backfill_s:.0f} s"
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--malls", default="1000,200", help="comma-separated mall counts")
    ap.add_argument("--resources", type=int, default=200_000)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds added to each request")
    ap.add_argument("--idle", type=float, default=125.0, help="seconds measured idle")
    ap.add_argument("--changes", type=int, default=45, help="changes timed with webhooks on")
    ap.add_argument("--creations", type=int, default=10, help="mall-scoped creations costed")
    ap.add_argument("--off-spacing", type=float, default=3.0, help="s between webhooks-off changes")
    ap.add_argument("--no-fallback", action="store_true", help="skip the per-mall path at 200")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--proof-only", action="store_true", help="print the rolling proof's cost alone"
    )
    ap.add_argument(
        "--side-by-side",
        action="store_true",
        help="issue #47's figures in one bounded in-process run (bench/side_by_side.py)",
    )
    ap.add_argument("--before", help="--side-by-side: a tree of older code, its route figures too")
    ap.add_argument("--before-label", default="before", help="--side-by-side: its name")
    ap.add_argument("--route-resources", type=int, default=2000, help="--side-by-side: part 1")
    ap.add_argument("--polls", type=int, default=5, help="--side-by-side: deals polls")
    ap.add_argument("--creation-malls", type=int, default=1000, help="--side-by-side: parts 2, 3")
    ap.add_argument("--creation-resources", type=int, default=20_000, help="--side-by-side")
    args = ap.parse_args()
    if args.side_by_side:
        args.proof_resources = args.resources
        await side_by_side.run(args)
        return
    malls = int(args.malls.split(",")[0])
    print("\n".join(proof_cost.table(args.resources, malls)), flush=True)
    if args.proof_only:
        return
    rng = random.Random(args.seed)
    rows = []
    for m in (int(x) for x in args.malls.split(",")):
        rows.append(await scenario(args, m, True, rng))
        report(rows[-1:], args, final=False)
        if m <= 200 and not args.no_fallback:
            rows.append(await scenario(args, m, False, rng))
            report(rows[-1:], args, final=False)
    report(rows, args)


if __name__ == "__main__":
    asyncio.run(main())
