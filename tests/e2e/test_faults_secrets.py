"""No secret in any log line (#31): a daemon run at debug level against the emulator, with
webhook deliveries, failing upstream requests, a forced re-login, the management API and
malformed HTTP requests to the callback path (aiohttp's parser quotes their first line, secret
and all, in its error), leaves the webhook secret, the upstream password, every session token
and the management bearer token out of every line it writes, and out of `ccsync status` and
`/healthz`; the standard library's log lines come out as structured lines too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sync.core import logs
from sync.core.errors import SyncError, redact_url
from sync.core.redact import redact_text, register
from sync.emulator import Emulator
from tests.support.mirror_rows import row
from tests.support.ports import free_port
from tests.support.processes import run, spawn
from tests.support.settings import upstream_keys, write_config
from tests.support.waiting import eventually

HOOK_SECRET = "hook-Secret-5d1c0b2a9e8f7a6b"


def _config(tmp_path: Path, emu: Emulator, port: int) -> Path:
    return write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(
            emu, "T_PW", types=["malls", "deals", "articles"], max_backoff=0.05, retry_budget=20.0
        ),
        mirror={"path": tmp_path / "m.db"},
        webhooks={"listen": f"127.0.0.1:{port}", "secret_env": "T_SECRET"},
        schedule={"poll_interval": 1.0, "deletions_interval": 1.0, "queue_batch_delay": 0.01},
        management={
            "base_url": emu.base_url,
            "product": "loyalty",
            "loyalty_club": "demo-club",
            "bearer_token_env": "T_MGMT",
            "press_releases_interval": 1.0,
        },
        logging={"level": "debug", "format": "json"},
    )


def _env(emu: Emulator) -> dict[str, str]:
    return {"T_PW": emu.password, "T_SECRET": HOOK_SECRET, "T_MGMT": emu.management.token}


async def _ccsync(emu: Emulator, *args: str) -> tuple[int, str, str]:
    return await run(*args, env=_env(emu), timeout=60)


async def _raw(port: int, request: bytes) -> bytes:
    """Send `request` as is (no client would send these) and read the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 10)
    finally:
        writer.close()


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        return r.status, await r.text()


async def _post(url: str, body: bytes) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=body, headers={"Content-Type": "application/json"}) as r,
    ):
        return r.status


async def test_no_secret_reaches_any_log_line_status_or_health(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Drive a daemon through deliveries, failures and hostile requests; collect everything it
    and `ccsync status` print, and `/healthz`: no secret anywhere."""
    port = free_port()
    cfg = _config(tmp_path, emulator, port)
    db = tmp_path / "m.db"
    tokens = set()
    proc = await spawn("run", "--config", str(cfg), env=_env(emulator))
    outputs: list[str] = []
    base = f"http://127.0.0.1:{port}"
    try:

        async def ready() -> bool:
            with contextlib.suppress(aiohttp.ClientError, ValueError):
                return bool(json.loads((await _get(f"{base}/healthz"))[1])["ready"])
            return False

        for _ in range(600):
            if await ready() or proc.returncode is not None:
                break
            await asyncio.sleep(0.1)
        assert await ready(), "the daemon never became ready"
        tokens.add(emulator.accounts.by_email[emulator.email].token)

        # Webhook deliveries: the emulator posts to /webhooks/<secret>.
        deals = emulator.ids("deals")
        emulator.update("deals", deals[0], {"title": "delivered one"})
        await eventually(lambda: (row(db, "deals", deals[0]) or {}).get("title") == "delivered one")
        # Failing upstream requests (retried, logged at debug), then a forced re-login.
        emulator.faults.error_rate = 0.5
        emulator.update("deals", deals[1], {"title": "delivered through faults"})
        await eventually(
            lambda: (row(db, "deals", deals[1]) or {}).get("title") == "delivered through faults",
            timeout=30,
        )
        emulator.faults.error_rate = 0
        emulator.force_logout()
        emulator.update("deals", deals[2], {"title": "after a re-login"})
        await eventually(
            lambda: (row(db, "deals", deals[2]) or {}).get("title") == "after a re-login"
        )
        tokens.add(emulator.accounts.by_email[emulator.email].token)
        # Hostile requests on the callback path: refused, and logged.
        hook = f"/webhooks/{HOOK_SECRET}"
        assert await _post(f"{base}{hook}", b"{broken") == 400
        assert (await _get(f"{base}{hook}"))[0] == 405
        assert await _post(f"{base}/webhooks/not-{HOOK_SECRET}", b"{}") == 404
        for request in (
            f"POST {hook}\x01 HTTP/1.1\r\nHost: x\r\n\r\n",  # a control character in the path
            f"POST {hook} HTTX/1.1\r\nHost: x\r\n\r\n",  # no such protocol
            f"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nP@ST {hook} HTTP/1.1\r\n\r\n",
        ):
            assert b" 400 " in (await _raw(port, request.encode()))[:20]
        status, health = await _get(f"{base}/healthz")
        outputs.append(health)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    outputs += [out.decode(), err.decode()]
    assert proc.returncode == 0, err.decode()[-3000:]
    for args in (("status",), ("status", "--json")):
        rc, out_s, err_s = await _ccsync(emulator, *args, "--config", str(cfg))
        assert rc == 0, err_s
        outputs += [out_s, err_s]

    logged = "\n".join(outputs)
    assert '"event": "webhook.accepted"' in logged and '"level": "debug"' in logged
    secrets = [HOOK_SECRET, emulator.password, emulator.management.token, *tokens]
    leaks = [s for s in secrets if s in logged]
    assert not leaks, [re.findall(rf".{{0,80}}{re.escape(s)}.{{0,20}}", logged)[:3] for s in leaks]
    assert not re.search(r"auth_token=[0-9a-f]{32}", logged)
    # The HTTP parser's complaints come out as structured lines, one each, the path masked.
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    bridged = [e for e in lines if e.get("logger_name") == "aiohttp.server"]
    assert bridged and all("/webhooks/***" in e.get("error", "") for e in bridged), bridged


def test_redact_text_masks_secrets_wherever_they_are() -> None:
    """Registered values anywhere; any callback path's secret segment (an upstream webhook id
    is kept); auth parameters in URLs and credential members of JSON text."""
    register("tok-3f2a9c1e7b")
    register("abc")  # too short to mask safely: ordinary text would lose words
    text = redact_text(
        "b'POST /webhooks/s3cr3t-path-0123456789 HTTP/1.1' DELETE /webhooks/42 "
        "https://h/deals?auth_id=me%40x.com&auth_timestamp=1700000000&auth_token=ffee&page=2 "
        '{"password": "hunter2-x", "authentication_token":"tok-3f2a9c1e7b", "name": "abc"}'
    )
    assert "s3cr3t" not in text and "/webhooks/*** HTTP/1.1" in text
    assert "/webhooks/42" in text
    assert "auth_token=***" in text and "auth_id=***" in text and "page=2" in text
    assert '"password": "***"' in text and "tok-3f2a9c1e7b" not in text and '"abc"' in text


def test_every_sink_runs_the_redaction() -> None:
    """Errors (message and hint), URLs and structlog events, exceptions included."""
    register("sekrit-value-99")
    err = SyncError("upstream said: sekrit-value-99 is wrong", hint="try /webhooks/sekrit")
    assert "sekrit" not in str(err)
    assert "sekrit" not in redact_url("http://h/webhooks/sekrit-value-99?x=1")
    try:
        raise ValueError("bad line b'POST /webhooks/another-one HTTP/1.1'")
    except ValueError:
        event: dict[str, Any] = {
            "event": "x sekrit-value-99",
            "nested": {"a": ["sekrit-value-99"]},
            "exc_info": True,
        }
        import structlog

        event = structlog.processors.format_exc_info(None, "error", event)  # type: ignore[arg-type]
        out = logs.redact(None, "error", event)
    assert "sekrit" not in json.dumps(out) and "another-one" not in json.dumps(out)


def test_a_crash_traceback_is_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """An exception nothing caught is printed as Python prints it, the secret masked."""
    logs.configure("info", "json")
    try:
        try:
            raise RuntimeError("while posting b'POST /webhooks/crash-secret-0123 HTTP/1.1'")
        except RuntimeError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    finally:
        logs.reset()
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError" in err and "/webhooks/*** HTTP/1.1" in err
    assert "crash-secret" not in err
