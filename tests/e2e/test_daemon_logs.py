"""The daemon's output at `info` is what docs/service.md shows (#40): one `job.done` line per job
run (seconds, requests, what it did), APScheduler's own lines only at `debug`, and nothing at info
that the page does not name. The daemon runs every job at least once against the emulator; the
test waits for that, never for a length of time."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from structlog.testing import capture_logs

from sync.core import logs
from sync.emulator import Emulator
from tests.support.daemon import running
from tests.support.paths import ROOT
from tests.support.settings import daemon_settings
from tests.support.waiting import eventually

SECTION = "## What the daemon logs"
JOBS = {"poll", "deletions", "proof", "hours", "changes", "verify", "subscriptions"}


def documented() -> tuple[list[dict[str, object]], set[str]]:
    """docs/service.md's sample minute (its JSON lines) and every other event name the
    section names in backticks."""
    text = (ROOT / "docs" / "service.md").read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.find("\n## ", len(SECTION))]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None, "the sample minute is a ```json block"
    sample = [json.loads(line) for line in block.group(1).splitlines() if line.strip()]
    named = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", section))
    return sample, named


def test_the_sample_minute_shows_one_job_line_per_run_with_its_figures() -> None:
    sample, _ = documented()
    jobs = [e for e in sample if e["event"] == "job.done"]
    assert jobs and all({"job", "seconds", "requests"} <= set(e) for e in jobs)
    assert all(e["level"] == "info" for e in sample)
    assert not [e for e in sample if str(e.get("logger_name", "")).startswith("apscheduler")]


async def test_the_daemon_logs_at_info_only_what_the_docs_show(
    emulator: Emulator, tmp_path: Path
) -> None:
    logs.configure("info", "json")  # as `ccsync run` does: the level filter and the bridge
    settings = daemon_settings(
        emulator,
        tmp_path / "m.db",
        webhooks=True,
        # The polls run at start, then leave the request budget to the others (a poll is
        # served first: at 0.3 s apart, the proof would wait behind them).
        poll_interval=5.0,
        deletions_interval=5.0,
        staleness_bound=10.0,
        hours_interval=0.5,
        subscriptions_interval=0.5,
        verify_interval=10.0,
        reconcile_interval=86400.0,  # retired: the daemon says so at start
    )
    # The 1 MiB older examples wrote: the daemon names it at start too.
    small = settings.webhooks.model_copy(update={"max_body_bytes": 1 << 20})
    settings = settings.model_copy(update={"webhooks": small})
    with capture_logs() as captured:
        async with running(settings):
            deal = emulator.ids("deals")[0]
            emulator.update("deals", deal, {"title": "changed for the log test"})

            def seen() -> set[str]:
                done = {str(e.get("job")) for e in captured if e["event"] == "job.done"}
                events = {str(e["event"]) for e in captured}
                return done | events

            await eventually(
                lambda: JOBS | {"worker.summary", "upstream.probed"} <= seen(), timeout=60
            )
    logging.getLogger("apscheduler").info("a line of the scheduler's own")  # bridged at debug
    info = [e for e in captured if e["log_level"] == "info"]
    events = {str(e["event"]) for e in info}
    sample, named = documented()
    assert not [e for e in info if str(e.get("logger_name", "")).startswith("apscheduler")]
    undocumented = events - named - {str(e["event"]) for e in sample}
    assert undocumented == set(), f"undocumented: {sorted(undocumented)}"
    assert {str(e["event"]) for e in sample} <= events, "a sample line the daemon never wrote"
    retired = [e for e in captured if e["event"] == "config.retired_key"]
    assert len(retired) == 1 and "staleness_bound" in str(retired[0]["hint"]), retired
    refusing = [e for e in captured if e["event"] == "config.refuses_what_the_spec_allows"]
    assert len(refusing) == 1 and "max_body_bytes = 1048576" in str(refusing[0]["hint"])
    # A webhook batch's and a backfill's cost, counted as a job run's is (`sync.core.tally`).
    for event in ("worker.summary", "backfill.done"):
        counts = [e["requests"] for e in info if e["event"] == event]
        assert counts and all(isinstance(n, int) for n in counts) and max(counts) > 0, event
    for e in info:
        if e["event"] == "job.done":
            assert isinstance(e["requests"], int) and isinstance(e["seconds"], float)
