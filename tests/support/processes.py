"""Subprocesses: `ccsync` commands and daemons as a user runs them, with their output and exit
codes, and every process a test started stopped again (a stray daemon would outlive the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from sync.emulator import Emulator
from tests.support.paths import ROOT

PIPE = asyncio.subprocess.PIPE
DEVNULL = asyncio.subprocess.DEVNULL


async def spawn(
    *args: str,
    env: Mapping[str, str] | None = None,
    module: str = "sync",
    stdout: int = PIPE,
    stderr: int = PIPE,
    prefix: Sequence[str] = (),
) -> asyncio.subprocess.Process:
    """`python -m <module> <args>` (`ccsync <args>`), `env` on top of this process's; `prefix`
    runs it through another program (`setpriv ...`, `tests.support.readonly`)."""
    return await asyncio.create_subprocess_exec(
        *prefix,
        sys.executable,
        "-m",
        module,
        *args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=stdout,
        stderr=stderr,
    )


async def run(
    *args: str,
    env: Mapping[str, str] | None = None,
    module: str = "sync",
    timeout: float = 120.0,
    prefix: Sequence[str] = (),
) -> tuple[int, str, str]:
    """Run `ccsync <args>` to its end: exit code, stdout, stderr."""
    proc = await spawn(*args, env=env, module=module, prefix=prefix)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


#: The variable the CLI suites' config files (`settings.cli_config`) read the password from.
CLI_PASSWORD_ENV = "CLI_PW"


async def ccsync(*args: str, emu: Emulator, timeout: float = 120.0) -> tuple[int, str, str]:
    """Run `ccsync <args>` against `emu` (its password in `$CLI_PW`): exit code, stdout,
    stderr."""
    return await run(*args, env={CLI_PASSWORD_ENV: emu.password}, timeout=timeout)


async def spawn_logged(
    log: Path, *argv: str, env: Mapping[str, str] | None = None
) -> asyncio.subprocess.Process:
    """`argv` with its output appended to `log` (a pipe nobody reads would block it)."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdin=DEVNULL,
            stdout=out,
            stderr=out,
        )


async def run_logged(*args: str, env: Mapping[str, str], log: Path, timeout: float = 600.0) -> int:
    """Run `ccsync <args>` to its end, its output appended to `log`: the exit code."""
    proc = await spawn_logged(log, sys.executable, "-m", "sync", *args, env=env)
    return await asyncio.wait_for(proc.wait(), timeout)


async def stop(
    proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM, timeout: float = 10.0
) -> tuple[int, str]:
    """Send `sig`; the exit code and stderr, the exit awaited at most `timeout` s."""
    proc.send_signal(sig)
    try:
        code = await asyncio.wait_for(proc.wait(), timeout=timeout)
    finally:
        await reap(proc)
    assert proc.stderr is not None
    return code, (await proc.stderr.read()).decode()


async def reap(proc: asyncio.subprocess.Process | None) -> None:
    """Kill `proc` if it still runs, and wait for it: nothing a test started outlives it."""
    if proc is not None and proc.returncode is None:
        proc.kill()
        await proc.wait()


async def healthy(port: int) -> bool:
    """True once a daemon's `/healthz` on `port` answers 200."""
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                return resp.status == 200
    except aiohttp.ClientError:
        return False


async def wait_healthy(port: int, proc: asyncio.subprocess.Process) -> None:
    """Wait (60 s at most) until the daemon `proc` is healthy; fails with its stderr if it
    exits first."""
    for _ in range(600):
        if proc.returncode is not None:
            assert proc.stderr is not None
            raise AssertionError(f"daemon exited: {(await proc.stderr.read()).decode()[-2000:]}")
        if await healthy(port):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("daemon never became healthy")


@dataclass
class DaemonProcess:
    """`ccsync run` as a real subprocess, its log in a file, killed and restarted at will."""

    config: Path
    env: dict[str, str]
    log: Path
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0

    async def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts} ---\n".encode())
        self.proc = await spawn_logged(
            self.log,
            sys.executable,
            "-m",
            "sync",
            "run",
            "--config",
            str(self.config),
            env=self.env,
        )

    async def kill(self) -> None:
        """SIGKILL the daemon; one that already ended by itself fails the test with its log's
        tail (what it died of), not the `ProcessLookupError` of signalling a process gone."""
        assert self.proc is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it may end between check and signal
                self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()
            if self.proc.returncode == -signal.SIGKILL:
                return
        raise AssertionError(
            f"the daemon ended by itself (exit {self.proc.returncode}) before it was killed:\n"
            f"{self.tail()}"
        )

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 60)
        return int(self.proc.returncode or 0)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]
