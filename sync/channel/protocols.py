"""The client's seams, as protocols: what the session needs of a transport and of a store.

`Sender`: what `ChannelSession` needs of a transport: send one logical request (retries inside)
and return the `Response`, count what it saw (`stats`), say why the upstream was never reached
(`unreachable_reason`), close. `sync.channel.transport.Transport` is the real one; a client is
given another as httpx's `Client(transport=...)` is (`ChannelClient(settings, transport=...)`),
so tests answer requests with a function and no HTTP server (`tests/support/transport.py`).

`MetaStore`: where a client keeps what it learns across runs (the mirror's `_sync_meta`,
`ChannelClient(settings, store=mirror.meta)`).

What the probes ask through (`Probed`) is `sync.channel.profile`'s: it names the session's class,
which imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from sync.channel.budget import RequestBudget
from sync.channel.transport import Response, Stats


class MetaStore(Protocol):
    """Where a client keeps what it learns across runs: the mirror's `_sync_meta`."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class Sender(Protocol):
    """A transport as the session sees it (`sync.channel.transport.Transport.send` says what
    each argument means): one logical request in, its final `Response` out."""

    #: Answers by status, retries, transport errors; the session adds its re-logins.
    stats: Stats
    #: Why the upstream was never reached, while a daemon's transport keeps trying; else None.
    unreachable_reason: str | None

    async def send(
        self,
        method: str,
        url: str,
        *,
        params: Callable[[], Mapping[str, str]] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        once: bool = False,
        budget: RequestBudget | None = None,
        attempts: int | None = None,
        observe: Callable[[Response], None] | None = None,
    ) -> Response: ...

    async def aclose(self) -> None: ...
