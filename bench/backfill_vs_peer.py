"""Backfill throughput beside a peer tool, dlt's `rest_api` source into SQLite, in one run.

The emulator serves N resources in its own process. Then, one after the other, each in its own
process so peak RSS is its own:
  dlt   dlt's `rest_api` source into SQLite through its `sqlalchemy` destination, on dlt's
        defaults (sequential extract, normalize, load; append) but for one load worker: SQLite
        has one writer, and dlt's default 20 fail at random with "database is locked". Plus what
        this API needs and dlt does not ship: an auth class that signs every request (auth_id,
        auth_timestamp, auth_token) and a paginator that stops at the page number of
        `links.last`. Same routes, page size, sort, includes and trimmed sideloads as `sync`;
        mall-scoped types are child resources of `malls` (`malls/{resources.malls.id}/stores`),
        deals one resource per visibility into one table;
  limit the bare pipeline of `backfill_vs_limit.py` (download + orjson + executemany, one
        process): how far ahead of dlt this machine can be at all, beside how far sync is;
  sync  `ccsync backfill` (which also lists each mall's hours; not counted as resources).
The three alternate `--repeat` times (default 3) and the best run of each is compared, as in
`backfill_vs_limit.py`. Resources are the rows of the listable types' tables in each database
(dlt's nested child tables, sync's link and included-only tables not counted). Below the table:
dlt's own stage timings.
The emulator keeps the page bodies it serves (`ccsync emulator --page-cache-mb`; here
`--emulator-cache-mb`, default 4096, 0 for off), so after the first round it costs the machine
little CPU, as a real upstream on its own servers would (see `_common.EMULATOR_CACHE_MB`).
Run:
    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/backfill_vs_peer.py [--n 200000] [--concurrency 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from _common import (
    JSONAPI_HEADERS,
    add_emulator_args,
    alternate,
    count_rows,
    emulator,
    last_page,
    limit_backfill,
    list_params,
    login_bytes,
    measure,
    signed,
    sync_backfill,
)


def dlt_pipeline(base: str, db: str, workdir: str) -> dict[str, Any]:
    """Load every listable type with dlt's rest_api; return rows and dlt's stage timings."""
    import dlt
    from dlt.common.configuration import configspec
    from dlt.sources.helpers import requests
    from dlt.sources.helpers.rest_client.auth import AuthConfigBase
    from dlt.sources.helpers.rest_client.paginators import BasePaginator
    from dlt.sources.rest_api import rest_api_source

    from sync.model import catalogue

    @configspec
    class SignedQueryAuth(AuthConfigBase):
        """The API's per-request signature as query parameters, signed anew on every request."""

        token: str = None  # type: ignore[assignment]

        def __call__(self, request: Any) -> Any:
            request.prepare_url(request.url, signed(self.token))
            return request

    class LinksLastPaginator(BasePaginator):
        """page[number] = 1, 2, ... up to the page number in the first response's `links.last`."""

        def __init__(self) -> None:
            super().__init__()
            self.page, self.last = 1, 0

        def init_request(self, request: Any) -> None:
            self.page, self.last, self._has_next_page = 1, 0, True
            self.update_request(request)

        def update_state(self, response: Any, data: list[Any] | None = None) -> None:
            if not self.last:  # constant over a listing: parse it once
                self.last = last_page(response.json())
            self.page += 1
            self._has_next_page = bool(data) and self.page <= self.last

        def update_request(self, request: Any) -> None:
            request.params = {**(request.params or {}), "page[number]": self.page}

    r = requests.post(f"{base}/accounts/login", data=login_bytes(), headers=JSONAPI_HEADERS)
    r.raise_for_status()
    token = r.json()["data"]["attributes"]["authentication_token"]

    resources: list[dict[str, Any]] = []
    for name in catalogue.LISTABLE:
        rtype = catalogue.TYPES[name]
        path = rtype.list_path("{resources.malls.id}" if rtype.level == "mall" else None)
        for scope in rtype.scope_params:
            suffix = "_".join(v.lower() for v in scope.values())
            resources.append(
                {
                    "name": f"{name}_{suffix}" if suffix else name,
                    "table_name": name,
                    "endpoint": {
                        "path": path.lstrip("/"),
                        "params": list_params(rtype, dict(scope)),
                        "data_selector": "data",
                    },
                }
            )
    source = rest_api_source(
        {
            "client": {
                "base_url": f"{base}/",
                "auth": SignedQueryAuth(token=token),
                "paginator": LinksLastPaginator(),
            },
            "resources": resources,  # type: ignore[typeddict-item]
        }
    )
    pipeline = dlt.pipeline(
        pipeline_name="peer",
        destination=dlt.destinations.sqlalchemy(f"sqlite:///{db}"),
        dataset_name="main",  # the SQLite file itself, not an attached one
        pipelines_dir=f"{workdir}/pipelines",
    )
    pipeline.run(source)
    trace = pipeline.last_trace
    stages = {
        s.step: (s.finished_at - s.started_at).total_seconds()
        for s in trace.steps
        if s.finished_at is not None
    }
    return {"rows": count_rows(db, catalogue.LISTABLE), "stages": stages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_emulator_args(ap)
    ap.add_argument("--concurrency", type=int, default=4, help="sync's upstream concurrency")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each pipeline")
    ap.add_argument("--dlt-only", metavar="BASE", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.dlt_only:
        print(json.dumps(dlt_pipeline(a.dlt_only, a.db, a.workdir)))
        return
    env = {**os.environ, "RUNTIME__DLT_TELEMETRY": "false", "RUNTIME__LOG_LEVEL": "WARNING"}
    stages: list[dict[str, float]] = []

    def dlt(tmp: str) -> tuple[float, float, int]:
        # dlt's global dir too: nothing under ~/.dlt. One load worker: dlt's default 20
        # threads fight over SQLite's one write lock, and at 200k resources one run in two
        # failed with "database is locked".
        denv = {**env, "DLT_DATA_DIR": f"{tmp}/dlt-data", "LOAD__WORKERS": "1"}
        cmd = [sys.executable, __file__, "--dlt-only", base, "--db", f"{tmp}/dlt.db"]
        secs, rss, out = measure([*cmd, "--workdir", tmp], denv)
        peer = json.loads(out.strip().splitlines()[-1])
        stages.append({**peer["stages"], "total": secs})
        return secs, rss, int(peer["rows"])

    with emulator(a.n, env, a.emulator_cache_mb) as base:
        runs = alternate(
            {
                "dlt": dlt,
                "limit": lambda tmp: limit_backfill(base, tmp, a.concurrency, env),
                "sync": lambda tmp: sync_backfill(base, tmp, a.concurrency, env),
            },
            a.repeat,
        )
    best = {name: min(r, key=lambda x: x[1]) for name, r in runs.items()}
    rss = {name: max(x[2] for x in r) for name, r in runs.items()}  # memory: the worst run
    rate = {name: rows / secs for name, (rows, secs, _) in best.items()}
    print(
        f"backfill vs peer: {a.n:,} resources served, concurrency {a.concurrency} (dlt: one "
        f"request at a time), best of {a.repeat} alternating runs each"
    )
    print(f"{'pipeline':<10}{'resources':>11}{'seconds':>10}{'res/s':>10}{'peak RSS MB':>14}")
    for name, (rows, secs, _) in best.items():
        print(f"{name:<10}{rows:>11,}{secs:>10.1f}{rate[name]:>10,.0f}{rss[name]:>14.0f}")
    print(f"ratio sync/dlt throughput: {rate['sync'] / rate['dlt']:.1f}x (goal >= 10x)")
    print(
        f"ratio limit/dlt throughput: {rate['limit'] / rate['dlt']:.1f}x (the bare pipeline of "
        "backfill_vs_limit.py: what one process can do; sync/limit "
        f"{rate['sync'] / rate['limit']:.2f})"
    )
    st = min(stages, key=lambda x: x["total"])
    parts = ", ".join(f"{k} {st[k]:.1f} s" for k in ("extract", "normalize", "load") if k in st)
    start = st["total"] - st.get("run", st["total"])
    print(f"dlt stages (its best run): {parts}; start-up (imports, login, process) {start:.1f} s")
    counts = {name: rows for name, (rows, _, _) in best.items()}
    if len(set(counts.values())) > 1:
        print(f"note: resource counts differ ({counts})")


if __name__ == "__main__":
    main()
