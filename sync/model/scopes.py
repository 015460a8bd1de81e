"""Scopes: one listing of one type, top level or in one mall, with its fixed filters.

A type's `level` (`catalogue.Level`) says whether it is listed at the top (`/deals`) or per mall
(`/malls/{id}/stores`); a `Scope` is one such listing, and its `key` names its cursor,
checkpoint and membership bookkeeping. Pure values: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sync.model import catalogue
from sync.model.catalogue import ResourceType


@dataclass(frozen=True)
class Scope:
    """One listing of one type: top level or one mall, with its fixed filters."""

    rtype: ResourceType
    mall_id: int | None = None
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return catalogue.scope_key(self.mall_id, self.params)


def scopes_of(rtype: ResourceType, malls: Sequence[int]) -> list[Scope]:
    """Every scope a type is listed in: per mall for mall-scoped types, per deal visibility."""
    owners: Sequence[int | None] = malls if rtype.level == "mall" else [None]
    return [Scope(rtype, m, p) for m in owners for p in rtype.scope_params]
