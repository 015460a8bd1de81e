"""sync.daemon.systemd: sd_notify messages, the watchdog interval, pings only when healthy."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sync.daemon.systemd import Notifier, watchdog_loop


@pytest.fixture
def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    yield sock
    sock.close()


def test_status_and_stopping_reach_systemd(notify_socket: socket.socket) -> None:
    n = Notifier()
    assert n.enabled
    n.status("backfilling deals")
    n.stopping()
    assert notify_socket.recv(100) == b"STATUS=backfilling deals"
    assert notify_socket.recv(100) == b"STOPPING=1"


def test_the_watchdog_interval_is_half_its_usec_and_none_without_systemd(
    notify_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    assert Notifier().watchdog_interval == 15.0
    monkeypatch.setenv("WATCHDOG_USEC", "30s")
    assert Notifier().watchdog_interval is None
    monkeypatch.delenv("WATCHDOG_USEC")
    assert Notifier().watchdog_interval is None
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert not Notifier().enabled and Notifier().watchdog_interval is None


class _Enough(Exception):
    pass


class CountingNotifier(Notifier):
    """A notifier whose watchdog fires at once and counts its pings."""

    def __init__(self) -> None:
        super().__init__()
        self.pings = 0

    def watchdog(self) -> None:
        self.pings += 1

    @property
    def watchdog_interval(self) -> float | None:
        return 0.0


async def test_the_watchdog_is_pinged_only_while_healthy() -> None:
    verdicts = iter([True, False, False, True])

    def healthy() -> bool:
        try:
            return next(verdicts)
        except StopIteration:
            raise _Enough from None

    n = CountingNotifier()
    with pytest.raises(_Enough):
        await watchdog_loop(n, healthy)
    assert n.pings == 2


async def test_without_a_watchdog_the_loop_idles_until_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    asked: list[bool] = []
    task = asyncio.create_task(watchdog_loop(Notifier(), lambda: asked.append(True) or True))
    await asyncio.sleep(0)
    assert not task.done() and asked == []
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
