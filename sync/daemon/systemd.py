"""systemd integration: readiness, status and watchdog pings over $NOTIFY_SOCKET (sdnotify).

Without NOTIFY_SOCKET (not started by systemd) every call is a no-op. The watchdog is pinged at
half of WATCHDOG_USEC, and only while the daemon reports itself healthy, so systemd restarts a
daemon that is alive but stuck.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import sdnotify


class Notifier:
    """sd_notify messages; silent when not under systemd."""

    def __init__(self) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        self._n = sdnotify.SystemdNotifier() if self.enabled else None

    def _send(self, message: str) -> None:
        if self._n is not None:
            self._n.notify(message)

    def ready(self) -> None:
        self._send("READY=1")

    def status(self, text: str) -> None:
        self._send(f"STATUS={text}")

    def watchdog(self) -> None:
        self._send("WATCHDOG=1")

    def stopping(self) -> None:
        self._send("STOPPING=1")

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half of WATCHDOG_USEC), or None without a watchdog."""
        raw = os.environ.get("WATCHDOG_USEC")
        if not self.enabled or not raw or not raw.isdigit():
            return None
        return int(raw) / 2_000_000


async def watchdog_loop(notifier: Notifier, is_healthy: Callable[[], bool]) -> None:
    """Ping the watchdog while healthy; runs until cancelled."""
    interval = notifier.watchdog_interval
    if interval is None:
        await asyncio.Event().wait()  # nothing to do; cancellable like the real loop
        return
    while True:
        if is_healthy():
            notifier.watchdog()
        await asyncio.sleep(interval)
