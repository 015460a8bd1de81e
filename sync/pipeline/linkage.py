"""Linkage: a resource's relationships as the mirror keeps them, read while its page is staged.

A to-one relationship (`Relationship.to_one`) becomes a column of its row holding the related id
(`<name>_id`, NULL when the linkage is null); a to-many one becomes the list of related ids the
store writes to its link table (`Staged.links`). A relationship whose `data` is absent says
nothing (the upstream did not send the linkage: the mirror keeps what it had), which is not the
same as a null or an empty list (the linkage is gone). Ids that are not integers are left out.
"""

from __future__ import annotations

from typing import Any

from sync.model.catalogue import ResourceType
from sync.pipeline.encoding import id_or_none

_MISSING = object()
#: Per to-many relationship: (owner id, related ids) of each resource that sent its linkage.
Links = dict[str, list[tuple[int, list[int]]]]


def take_linkage(
    rtype: ResourceType,
    rid: int,
    relationships: dict[str, Any],
    columns: dict[str, Any],
    links: Links,
) -> None:
    """Put resource `rid`'s to-one linkage into `columns` and its to-many linkage into `links`."""
    for rel in rtype.relationships:
        data = (relationships.get(rel.name) or {}).get("data", _MISSING)
        if data is _MISSING:
            continue
        if rel.to_one:
            columns[rel.column] = id_or_none(data.get("id")) if isinstance(data, dict) else None
        elif isinstance(data, list):
            related = [
                i
                for d in data
                if isinstance(d, dict) and (i := id_or_none(d.get("id"))) is not None
            ]
            links.setdefault(rel.name, []).append((rid, related))
