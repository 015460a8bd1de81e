"""Each command needs only its own secrets (#40): `backfill`, `reconcile` (and `--full`),
`probe` and the readers run with the webhook secret's source unset or unreadable; `run` resolves
it, and its error for a missing one has the file prefix and names every source."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync.emulator import Emulator
from tests.support.ports import free_port
from tests.support.processes import reap, spawn, stop, wait_healthy
from tests.support.processes import run as ccsync
from tests.support.settings import SECRET, upstream_keys, write_config

#: The password source every upstream command resolves; nothing else is set.
PW_ENV = "T40_PW"
HOOK_ENV = "T40_WEBHOOK_SECRET"


def _config(tmp_path: Path, emu: Emulator, port: int = 8999, **webhooks: object) -> Path:
    return write_config(
        tmp_path / "sync.toml",
        upstream=upstream_keys(emu, PW_ENV, types=["malls", "deals"], max_backoff=0.05),
        mirror={"path": tmp_path / "m.db"},
        webhooks={"listen": f"127.0.0.1:{port}", **webhooks},
        logging={"level": "warning", "format": "json"},
    )


@pytest.fixture(params=["secret_env", "secret_file", "secret_credential"])
def webhook_source(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, object]:
    """A webhook secret source that cannot be resolved here: an unset variable, a missing
    file, a credential without $CREDENTIALS_DIRECTORY."""
    return {
        "secret_env": {"secret_env": HOOK_ENV},
        "secret_file": {"secret_file": tmp_path / "no-such-secret"},
        "secret_credential": {"secret_credential": "webhook-secret"},
    }[str(request.param)]


@pytest.fixture(autouse=True)
def _no_webhook_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOOK_ENV, raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


#: The readers (`status`, `changes`, `datasette-metadata`) resolve no secret at all:
#: tests/e2e/test_readers.py runs them under a configuration whose every secret is unreadable.
#: `reconcile --full` is the verify, then the reconcile.
UPSTREAM_COMMANDS = [["backfill", "--quiet"], ["reconcile", "--full"], ["probe"]]


async def test_commands_other_than_run_never_resolve_the_webhook_secret(
    emulator: Emulator, tmp_path: Path
) -> None:
    """The webhook secret named by a variable that is not set: every other command runs."""
    cfg = _config(tmp_path, emulator, secret_env=HOOK_ENV)
    env = {PW_ENV: emulator.password}
    for args in UPSTREAM_COMMANDS:
        code, out, err = await ccsync(*args, "--config", str(cfg), env=env, timeout=60)
        assert code == 0, (args, err)
        assert "secret" not in err, (args, err)


async def test_backfill_never_opens_the_webhook_secret_file_or_credential(
    emulator: Emulator, tmp_path: Path, webhook_source: dict[str, object]
) -> None:
    cfg = _config(tmp_path, emulator, **webhook_source)
    code, _, err = await ccsync(
        "backfill", "--quiet", "--config", str(cfg), env={PW_ENV: emulator.password}
    )
    assert code == 0, err


async def test_run_without_its_webhook_secret_names_the_file_and_every_source(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = _config(tmp_path, emulator)
    code, _, err = await ccsync("run", "--config", str(cfg), env={PW_ENV: emulator.password})
    assert code == 2
    assert err.startswith(f"ccsync: configuration error: {cfg}: webhooks: secret is required")
    for source in ("secret,", "secret_env", "secret_file", "secret_credential", "enabled = false"):
        assert source in err, err


async def test_run_with_an_unreadable_webhook_secret_is_refused(
    emulator: Emulator, tmp_path: Path
) -> None:
    cfg = _config(tmp_path, emulator, secret_file=tmp_path / "no-such-secret")
    code, _, err = await ccsync("run", "--config", str(cfg), env={PW_ENV: emulator.password})
    assert code == 2 and str(cfg) in err and "secret_file" in err, err


async def test_run_resolves_the_webhook_secret_it_serves(
    emulator: Emulator, tmp_path: Path
) -> None:
    port = free_port()
    cfg = _config(tmp_path, emulator, port, secret_env=HOOK_ENV)
    proc = await spawn(
        "run", "--config", str(cfg), env={PW_ENV: emulator.password, HOOK_ENV: SECRET}
    )
    try:
        await wait_healthy(port, proc)
        code, _ = await stop(proc)
        assert code == 0
    finally:
        await reap(proc)
