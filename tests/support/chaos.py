"""The storm's set-up, shared by the chaos suites and the Litestream one: the daemon's config
(every job every few seconds, or the shipped defaults), the faults switched on, and the sizes
read from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sync.emulator import Emulator
from tests.support.settings import upstream_keys, write_config

#: The webhook secret of the storm daemons (`$CHAOS_SECRET`).
SECRET = "chaos-secret-0123456789abcdef"

#: The storm's schedule: every job every few seconds, so kills land mid-reconcile.
FAST_SCHEDULE: dict[str, float] = {
    "poll_interval": 2.0,
    "deletions_interval": 1.0,
    "staleness_bound": 4.0,  # the rolling proof, the daily reconcile's successor (#39)
    "subscriptions_interval": 1.0,
    "queue_batch_delay": 0.02,
    "reconcile_max_delete_share": 1.0,
}

#: The fast schedule runs every job ~30x as often as the shipped one; its request budget is
#: scaled alike (the shipped 20/s would starve the reconcile and verify priorities by design).
FAST_BUDGET: dict[str, float] = {"max_requests_per_second": 200.0}


def env_int(name: str, default: int) -> int:
    """A size of the run: `$name`, or `default`."""
    return int(os.environ.get(name, default))


def chaos_config(
    tmp: Path,
    emu: Emulator,
    db: Path,
    port: int,
    schedule: Mapping[str, float] | None = FAST_SCHEDULE,
    mirror: Mapping[str, Any] | None = None,
) -> Path:
    """The daemon's config (password in `$CHAOS_PW`, secret in `$CHAOS_SECRET`);
    `schedule=None` keeps the shipped defaults of every job, the request budget included;
    `mirror` the `[mirror]` section in place of `path = db` (a PostgreSQL `url` and `schema`)."""
    fast = schedule is not None and FAST_SCHEDULE.items() <= schedule.items()
    sections: dict[str, Mapping[str, Any]] = {
        "upstream": upstream_keys(
            emu,
            "CHAOS_PW",
            timeout=1.0,
            max_backoff=0.3,
            retry_budget=120.0,
            **(FAST_BUDGET if fast else {}),
        ),
        "mirror": mirror or {"path": db},
        "webhooks": {"listen": f"127.0.0.1:{port}", "secret_env": "CHAOS_SECRET"},
    }
    if schedule:
        sections["schedule"] = schedule
    sections["logging"] = {"level": "warning", "format": "json"}
    return write_config(tmp / "sync.toml", **sections)


def storm_faults(emu: Emulator) -> None:
    """Every fault on, at the storm's rates."""
    f = emu.faults
    f.error_rate, f.rate_429, f.retry_after = 0.04, 0.02, 1
    f.stall_rate, f.stall_seconds, f.drop_rate = 0.02, 2.0, 0.01
    f.webhook_loss_rate, f.webhook_duplicate_rate, f.webhook_reorder = 0.2, 0.1, True
    f.clock_offset = 10.0  # inside the 30 s signature window
    f.stale_rate = 0.05  # a lagging replica answers some listing pages with older copies
    emu.data.stamp_forms = True  # absolute stamps in several ISO forms of the same instant
