"""`Listing`: one listing request as a value, built once and handed down (as httpx hands a
`Request`): the scope listed (type, mall, fixed filters) and what is asked of it.

`ChannelClient.list_page`, `list_response` and `iter_pages` take a `Listing` (or a bare `Scope`,
which is the listing with the defaults); the client turns it into the query of page `n`
(`ChannelClient.query`). Pure value: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope


@dataclass(frozen=True)
class Listing:
    """One listing request of a scope: its extra `params` (filters, `sort`), sparse
    `fields` of the type (None: every field), whether its include paths are asked, and the
    page `size` (None: the configured one)."""

    scope: Scope
    params: Mapping[str, str] = field(default_factory=dict)
    fields: Sequence[str] | None = None
    include: bool = True
    size: int | None = None

    @classmethod
    def of(cls, request: Scope | Listing) -> Listing:
        """`request` as a `Listing` (a `Scope` is its listing with the defaults)."""
        return request if isinstance(request, Listing) else cls(request)

    @property
    def rtype(self) -> ResourceType:
        return self.scope.rtype

    @property
    def path(self) -> str:
        return self.scope.rtype.list_path(self.scope.mall_id)
