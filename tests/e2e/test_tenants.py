"""Several tenants on one host (docs/tenants.md, issue #33): two instances of the template unit
`systemd/ccsync@.service` run side by side against two emulators and keep to their own files.

No systemd runs here, so the test does what systemd would for instance `%i`, reading the unit
itself: the command line from `ExecStart` (`ccsync run --config /etc/ccsync/%i.toml`), the state
and working directory from `StateDirectory`/`WorkingDirectory`, the credentials from
`LoadCredential` (copied into the instance's own `$CREDENTIALS_DIRECTORY`) and the environment
from `Environment`. Every absolute path lands under one temporary root, so the file listing of
that root shows what each daemon wrote and where. Everything binds 127.0.0.1 on free ports.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest

from sync.emulator import Emulator
from tests.support.compare import compare
from tests.support.mirror_rows import row
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.units import parse
from tests.support.waiting import eventually

TEMPLATE = "ccsync@.service"
TYPES = ["malls", "deals", "articles", "stores"]
# The files a daemon may leave in its state directory: the mirror, SQLite's WAL and shared
# memory, the writer lock's info file and the storage health file (removed at a clean stop).
MIRROR = "mirror.db"
OWN_FILES = {MIRROR, f"{MIRROR}-wal", f"{MIRROR}-shm", f"{MIRROR}.lock", f"{MIRROR}.health"}


@dataclass
class Tenant:
    """One instance of the template as systemd would lay it out under `root`."""

    name: str
    emulator: Emulator
    argv: list[str]
    config: Path
    state: Path
    workdir: Path
    credentials: Path
    environment: dict[str, str]
    port: int
    log: Path

    @property
    def mirror(self) -> Path:
        return self.state / MIRROR


def _under(root: Path, path: str) -> Path:
    """An absolute path of the unit, moved under the test's root."""
    assert path.startswith("/"), path
    return root / path.lstrip("/")


def _files(directory: Path) -> set[str]:
    """Every file below `directory`, as paths relative to it."""
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def lay_out(root: Path, logs: Path, name: str, emu: Emulator, secret: str) -> Tenant:
    """Write what an operator writes for tenant `name` (docs/tenants.md: its config and its two
    credential files under /etc/ccsync), then do what systemd does when `ccsync@<name>` starts:
    create its state directory and copy its credentials into its own credentials directory.
    Every path and the command line come from the template unit, with `%i` = `name`."""
    unit = {key: [v.replace("%i", name) for v in values] for key, values in parse(TEMPLATE).items()}
    argv = shlex.split(unit["Service.ExecStart"][0])
    assert Path(argv[0]).name == "ccsync" and argv[1:3] == ["run", "--config"], argv
    config = _under(root, argv[3])
    state = _under(root, "/var/lib/" + unit["Service.StateDirectory"][0])
    workdir = _under(root, unit["Service.WorkingDirectory"][0])
    credentials = root / "run" / "credentials" / f"ccsync@{name}.service"
    state.mkdir(parents=True)
    credentials.mkdir(parents=True)
    values = {"password": emu.password, "webhook-secret": secret}
    for spec in unit["Service.LoadCredential"]:
        cred, _, source = spec.partition(":")
        src = _under(root, source)
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(values[cred] + "\n")
        shutil.copyfile(src, credentials / cred)
    port = free_port()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "[upstream]\n"
        f'base_url = "{emu.base_url}"\nemail = "{emu.email}"\n'
        'password_credential = "password"\n'
        f"types = {orjson.dumps(TYPES).decode()}\nmax_backoff = 0.05\n"
        f'[mirror]\npath = "{state / MIRROR}"\n'
        f'[webhooks]\nlisten = "127.0.0.1:{port}"\nsecret_credential = "webhook-secret"\n'
        "[schedule]\npoll_interval = 3600.0\ndeletions_interval = 3600.0\n"
        "queue_batch_delay = 0.01\n"
        '[logging]\nlevel = "warning"\nformat = "json"\n'
    )
    environment = dict(v.split("=", 1) for v in unit.get("Service.Environment", []))
    return Tenant(
        name=name,
        emulator=emu,
        argv=[sys.executable, "-m", "sync", *argv[1:3], str(config)],
        config=config,
        state=state,
        workdir=workdir,
        credentials=credentials,
        environment=environment,
        port=port,
        log=logs / f"{name}.log",
    )


async def start(tenant: Tenant) -> asyncio.subprocess.Process:
    """Start the tenant's daemon the way its unit does: its command line, its working directory,
    its own $CREDENTIALS_DIRECTORY and nothing of the other tenant's in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNC_", "NOTIFY_"))}
    env.update(tenant.environment)
    env.update(CREDENTIALS_DIRECTORY=str(tenant.credentials), PYTHONPATH=str(ROOT))
    with tenant.log.open("wb") as log:
        return await asyncio.create_subprocess_exec(
            *tenant.argv,
            cwd=tenant.workdir,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )


async def wait_healthy(tenant: Tenant, proc: asyncio.subprocess.Process) -> None:
    """Until the tenant's own /healthz answers 200 (its first backfill done)."""
    url = f"http://127.0.0.1:{tenant.port}/healthz"
    async with aiohttp.ClientSession() as http:
        for _ in range(400):
            if proc.returncode is not None:
                raise AssertionError(f"{tenant.name} exited: {tenant.log.read_text()[-2000:]}")
            try:
                async with http.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{tenant.name} never became healthy: {tenant.log.read_text()[-2000:]}")


@asynccontextmanager
async def served(seed: int, email: str, password: str) -> AsyncIterator[Emulator]:
    """An emulator of one tenant's account on 127.0.0.1 (its own data set, login and port)."""
    emu = Emulator(
        resources=300,
        seed=seed,
        email=email,
        password=password,
        webhook_window=0.01,
        webhook_retry_interval=0.05,
    )
    async with emu.serve(port=0):
        yield emu


async def test_two_instances_run_side_by_side_without_touching_each_others_files(
    tmp_path: Path,
) -> None:
    root, logs = tmp_path / "root", tmp_path / "logs"
    logs.mkdir()
    async with AsyncExitStack() as stack:
        emu_a = await stack.enter_async_context(served(7, "a@acme.example", "acme-password-1"))
        emu_b = await stack.enter_async_context(served(8, "b@globex.example", "globex-password-2"))
        a = lay_out(root, logs, "a", emu_a, "acme-webhook-secret-0123456789")
        b = lay_out(root, logs, "b", emu_b, "globex-webhook-secret-987654321")
        assert a.state != b.state and a.port != b.port and a.credentials != b.credentials
        assert a.workdir == a.state and b.workdir == b.state
        assert a.config == root / "etc/ccsync/a.toml" and a.state == root / "var/lib/ccsync/a"
        before = _files(root)
        assert _files(a.state) == set() and _files(b.state) == set()

        procs = [await start(a), await start(b)]

        async def stop_all() -> None:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()

        stack.push_async_callback(stop_all)
        await asyncio.gather(*(wait_healthy(t, p) for t, p in zip((a, b), procs, strict=True)))

        # Each mirror holds its own account's data, and the two data sets differ.
        for tenant, other in ((a, b), (b, a)):
            assert compare(tenant.mirror, tenant.emulator, TYPES).differences == 0, tenant.name
            assert compare(tenant.mirror, other.emulator, TYPES).differences > 0, tenant.name
        # A change upstream reaches its own tenant (through that tenant's webhook port) only.
        deal_a, deal_b = emu_a.ids("deals")[0], emu_b.ids("deals")[0]
        emu_a.update("deals", deal_a, {"title": "acme's change"})
        emu_b.update("deals", deal_b, {"title": "globex's change"})
        await eventually(
            lambda: (row(a.mirror, "deals", deal_a) or {}).get("title") == "acme's change"
        )
        await eventually(
            lambda: (row(b.mirror, "deals", deal_b) or {}).get("title") == "globex's change"
        )
        assert compare(a.mirror, emu_a, TYPES).differences == 0
        assert compare(b.mirror, emu_b, TYPES).differences == 0

        # While both run: each state directory holds its own mirror's files only, and the lock
        # beside each mirror names the process of its own tenant.
        for tenant, proc in zip((a, b), procs, strict=True):
            files = _files(tenant.state)
            assert MIRROR in files and files <= OWN_FILES, (tenant.name, files)
            holder = (tenant.state / f"{MIRROR}.lock").read_text().split()
            assert holder[0] == str(proc.pid), (tenant.name, holder)

        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), timeout=15)
        assert codes == [0, 0], [t.log.read_text()[-2000:] for t in (a, b)]

    # Nothing was written outside the two state directories, and in each only its own mirror.
    after = _files(root)
    new = after - before
    for tenant in (a, b):
        mine = {f for f in new if (root / f).parent == tenant.state}
        assert {Path(f).name for f in mine} <= OWN_FILES and MIRROR in {Path(f).name for f in mine}
        new -= mine
    assert new == set(), f"files written outside the tenants' own state directories: {new}"
    assert after >= before  # nor did a daemon delete anything the operator wrote


def test_the_docs_example_config_fits_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/tenants.md's `acme.toml` is what `ccsync@acme` reads: its mirror sits in the
    instance's state directory, it names exactly the credentials the unit loads, and it parses
    with them in the instance's $CREDENTIALS_DIRECTORY."""
    import tomllib

    from sync.core.config import parse_config

    doc = (ROOT / "docs" / "tenants.md").read_text()
    start = doc.index("```toml\n") + len("```toml\n")
    data = tomllib.loads(doc[start : doc.index("```", start)])
    unit = {k: [v.replace("%i", "acme") for v in vs] for k, vs in parse(TEMPLATE).items()}
    state = Path("/var/lib") / unit["Service.StateDirectory"][0]
    assert Path(data["mirror"]["path"]).parent == state
    loaded = {spec.partition(":")[0] for spec in unit["Service.LoadCredential"]}
    named = {data["upstream"]["password_credential"], data["webhooks"]["secret_credential"]}
    assert named == loaded
    creds = tmp_path / "ccsync@acme.service"
    creds.mkdir()
    for name in loaded:
        (creds / name).write_text(f"{name}-value-0123456789abcdef\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    settings = parse_config(data)
    assert settings.upstream.secret_password() == "password-value-0123456789abcdef"
    assert settings.webhooks.port == 8801 and settings.webhooks.host == "127.0.0.1"
