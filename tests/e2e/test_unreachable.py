"""Fail fast on what will not heal: an upstream that cannot be reached at all from the start
(refused, DNS, TLS) is named within seconds with its URL and the setting to fix, a one-shot
command exits 3, the daemon logs it and keeps retrying; transient faults keep the budget."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest
from aioresponses import aioresponses
from structlog.testing import capture_logs

from sync.channel.listing import Listing
from sync.channel.transport import UNREACHABLE_GRACE
from sync.core.errors import RetriesExhaustedError, UnreachableError
from sync.model import catalogue
from sync.model.scopes import Scope
from tests.support.channel_fakes import BASE, LOGIN, PASSWORD, FakeSleep, page_doc, token_doc
from tests.support.channel_fakes import DEALS_URL as DEALS
from tests.support.channel_fakes import channel_client as client
from tests.support.ports import free_port as _closed_port
from tests.support.processes import run, spawn
from tests.support.settings import write_config


def refused() -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="upstream.test", port=80, ssl=True)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connect call failed"))  # type: ignore[arg-type]


async def test_refused_from_the_start_gives_up_within_the_grace_naming_url_and_fix() -> None:
    sleep = FakeSleep()
    with aioresponses() as m, capture_logs() as logs:
        m.post(LOGIN, exception=refused(), repeat=True)
        async with client(sleep) as c:
            with pytest.raises(UnreachableError) as info:
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
            # Every later request of the same client gives up at its first refusal.
            waited = len(sleep.calls)
            with pytest.raises(UnreachableError):
                await c.list_page(Scope(catalogue.TYPES["deals"]), 2)
            assert len(sleep.calls) == waited
    text = str(info.value)
    assert f"{BASE}/accounts/login" in text and "[upstream] base_url" in text
    assert sum(sleep.calls) <= UNREACHABLE_GRACE  # not the 300 s retry budget
    assert PASSWORD not in text + repr(logs)


async def test_once_the_upstream_answered_a_refusal_is_transient_under_the_budget() -> None:
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, exception=refused())
        m.get(DEALS, exception=refused())
        m.get(DEALS, payload=page_doc(3))  # the upstream restarted
        async with client(sleep) as c:
            page = await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
        assert len(page.resources) == 3
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, exception=refused(), repeat=True)
        async with client(FakeSleep(), retry_budget=30, max_backoff=5) as c:
            with pytest.raises(RetriesExhaustedError, match="retry_budget"):
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)


async def test_transient_faults_from_the_start_keep_the_retry_budget() -> None:
    """A 503 or a timeout is an answer or a slow upstream, never 'unreachable': retried for as
    long as the budget allows, past the grace of an unreachable one."""
    sleep = FakeSleep()
    with aioresponses() as m:
        m.post(LOGIN, exception=TimeoutError())
        m.post(LOGIN, status=503)
        m.post(LOGIN, payload=token_doc(), status=201)
        for _ in range(12):
            m.get(DEALS, status=503)
        m.get(DEALS, payload=page_doc(2))
        async with client(sleep, retry_budget=600, max_backoff=30) as c:
            # No include: a 5xx of a listing with one is first searched for a failing path
            # (`sync.channel.includes`); this measures the retry budget alone.
            page = await c.list_page(Listing(Scope(catalogue.TYPES["deals"]), include=False), 1)
            assert c.session.stats.retries == 14
    assert len(page.resources) == 2
    with aioresponses() as m:
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, status=503, repeat=True)
        sleep = FakeSleep()
        async with client(sleep, retry_budget=60, max_backoff=5) as c:
            with pytest.raises(RetriesExhaustedError, match="HTTP 503"):
                await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    assert sum(sleep.calls) > UNREACHABLE_GRACE  # the budget, not the grace


async def test_the_daemon_logs_unreachable_once_and_keeps_retrying_until_it_answers() -> None:
    sleep = FakeSleep()
    with aioresponses() as m, capture_logs() as logs:
        for _ in range(40):  # far past the grace and past the retry budget
            m.post(LOGIN, exception=refused())
        m.post(LOGIN, payload=token_doc(), status=201)
        m.get(DEALS, payload=page_doc(2))
        async with client(sleep, fail_fast=False, retry_budget=20, max_backoff=2) as c:
            page = await c.list_page(Scope(catalogue.TYPES["deals"]), 1)
    assert len(page.resources) == 2 and sum(sleep.calls) > 20
    events = [e for e in logs if e["event"] == "upstream.unreachable"]
    assert len(events) == 1
    assert events[0]["url"] == f"{BASE}/accounts/login" and "base_url" in events[0]["hint"]
    assert [e for e in logs if e["event"] == "upstream.reachable"]


# -- the commands, as a user runs them ---------------------------------------------------------


def _config(tmp_path: Path, base_url: str, *, listen: int | None = None) -> Path:
    webhooks = (
        {"listen": f"127.0.0.1:{listen}", "secret": "s" * 24} if listen else {"enabled": False}
    )
    return write_config(
        tmp_path / "sync.toml",
        upstream={
            "base_url": base_url,
            "email": "ops@example.com",
            "password_env": "T_PW",
            "types": ["malls", "deals"],
        },
        mirror={"path": tmp_path / "m.db"},
        webhooks=webhooks,
        logging={"format": "json"},
    )


@pytest.mark.parametrize("command", [["backfill", "-q"], ["reconcile"], ["webhooks", "list"]])
async def test_a_one_shot_command_gives_up_within_seconds_naming_url_and_base_url(
    tmp_path: Path, command: list[str]
) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/api"
    proc = await spawn(*command, "--config", str(_config(tmp_path, base)), env={"T_PW": PASSWORD})
    try:
        # Before: silent for the whole retry budget (300 s), then "raise retry_budget".
        _, err = await asyncio.wait_for(proc.communicate(), timeout=15)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = err.decode()
    assert proc.returncode == 3, text
    assert base in text and "[upstream] base_url" in text
    assert "Traceback" not in text and PASSWORD not in text


async def test_the_daemon_names_an_unreachable_upstream_within_seconds_and_keeps_running(
    tmp_path: Path,
) -> None:
    base = f"http://127.0.0.1:{_closed_port()}"
    port = _closed_port()
    cfg = _config(tmp_path, base, listen=port)
    proc = await spawn("run", "--config", str(cfg), env={"T_PW": PASSWORD})
    assert proc.stderr is not None
    try:
        seen = ""

        async def until_named() -> None:
            nonlocal seen
            while line := await proc.stderr.readline():  # type: ignore[union-attr]
                seen += line.decode()
                if "upstream.unreachable" in line.decode():
                    return
            raise AssertionError(f"the daemon exited: {seen[-2000:]}")

        await asyncio.wait_for(until_named(), timeout=15)
        assert re.search(rf"{re.escape(base)}/accounts/login", seen)
        assert "[upstream] base_url" in seen and PASSWORD not in seen
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:  # still retrying, not dead
            assert proc.returncode is None, seen
            await asyncio.sleep(0.1)
        # /healthz says why it is still starting.
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                health = await resp.json()
        assert health["status"] == "starting"
        assert any("[upstream] base_url" in p for p in health["problems"]), health
        # `ccsync status` says it first, as /healthz lists it (#48).
        lines: list[str] = []
        for _ in range(50):
            code, out, err = await run("status", "--mirror", str(tmp_path / "m.db"))
            assert code == 0, err
            lines = out.splitlines()
            if lines[0] != "starting (first backfill)":
                break
            await asyncio.sleep(0.2)
        assert lines[0].startswith("degraded: ") and "[upstream] base_url" in lines[0], lines
        assert any(x.startswith("problem: ") and "[upstream] base_url" in x for x in lines)
        # Stop while it waits between two retries: it exits at once, with 0.
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
