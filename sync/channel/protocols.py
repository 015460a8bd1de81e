"""What the client's parts see of it, as protocols: the parts are held by the client and
cannot name its class without an import cycle (`sync.channel.client` imports them).

`MetaStore`: where a client keeps what it learns across runs (the mirror's `_sync_meta`,
`ChannelSession.keep`). `Probed`: what the probes (`sync.channel.profile.Profiler`) ask through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.paging import Paging
from sync.channel.signing import Credentials
from sync.channel.transport import Response, Transport
from sync.model.scopes import Scope


class MetaStore(Protocol):
    """Where a client keeps what it learns across runs: the mirror's `_sync_meta`."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class Probed(Protocol):
    """What the probes ask through: the `ChannelClient`, as a protocol (the client holds the
    include fallback, which probes: this module cannot name it without a cycle)."""

    base: str
    api_version: str | None
    paging: Paging

    @property
    def transport(self) -> Transport: ...

    @property
    def credentials(self) -> Credentials: ...

    @property
    def clock_offset(self) -> float: ...

    async def list_page(
        self,
        request: Scope | Listing,
        number: int,
        *,
        refusals: bool = True,
        attempts: int | None = None,
        as_asked: bool = False,
    ) -> Page: ...

    async def list_deletions(
        self, number: int, *, size: int | None = None, sort: str | None = "created_at"
    ) -> Page: ...

    async def request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Response: ...
