"""Sideloaded types (images, tags, groups): kept fresh and pruned, whether or not an owner changed.

These types have no list route: they reach the mirror only as `included` copies beside their
owners. The spec does not promise that an owner's `updated_at` moves when one of its images is
edited or deleted, so neither polls (which follow owners' stamps) nor the id/stamp reconcile
would ever see such a change. This module closes that gap, once per reconcile cycle:

- `params` is what a reconcile listing asks for besides ids and stamps: the owners' to-many
  relationships (`include=images,images.tags,stores` and the relationship names in the
  owner's sparse fieldset, so each owner's linkage comes back), with the sideloaded resources
  whole and the listed ones trimmed to their stamp. So every link table, not only the
  sideloads', is refreshed once per cycle: an upstream that changes linkage without touching
  the owner (a contact added to a mall, a product dropped from a store) is caught too.
- `apply_page` writes the included rows of one such page (an image is still guarded by its
  own `updated_at`; tags and groups, which have none, take the served copy), and replaces the
  sideload links of every owner whose mirrored copy has the same `updated_at` as the listed
  one: the linkage changed under an unchanged stamp (an image deleted upstream drops out of
  it). Owners listed with another stamp are left to the reconcile, which refetches them whole.
- `prune` removes the sideloaded rows no link references any more, and the links of removed
  rows (an image's tags).

Cost: the reconcile listing pages carry the included rows (bytes), not more requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.staging import stage_resources
from sync.store import MirrorStore

#: The types that only ever arrive as sideloads.
SIDELOADED: tuple[str, ...] = tuple(n for n, t in catalogue.TYPES.items() if not t.listable)


def relationships(rtype: ResourceType) -> tuple[catalogue.Relationship, ...]:
    """The to-many relationships of `rtype` (link tables) a reconcile listing refreshes."""
    return tuple(r for r in rtype.relationships if not r.to_one)


def params(rtype: ResourceType) -> tuple[list[str], dict[str, str]]:
    """(sparse fieldset, extra query parameters) of a reconcile listing of `rtype`: its stamps
    and to-many linkage, the sideloaded types whole (with their own linkage, `images.tags`),
    listed types trimmed to their stamp (the listing of their own type reconciles them)."""
    rels = relationships(rtype)
    # To-one relationships too (an event's mall, a job listing's store): their linkage can
    # change under an unchanged stamp as well (an event moved to another mall).
    one = tuple(r for r in rtype.relationships if r.to_one)
    fields = ["updated_at"] if rtype.has_updated_at else []
    if not rels and not one:
        return fields, {}
    fields += [r.name for r in (*rels, *one)]
    extra = {"include": ",".join(catalogue.include_paths((*rels, *one)))}
    listed = {r.target for r in (*rels, *one) if r.target not in SIDELOADED}
    extra.update(catalogue.trim_params(catalogue.sideload_trim(rtype, listed)))
    return fields, extra


def apply_page(
    mirror: MirrorStore,
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    included: Sequence[dict[str, Any]],
) -> int:
    """Write one reconcile page's sideloads and the unchanged owners' links; see the module
    docstring. Returns how many owners' links were compared."""
    rels = relationships(rtype)
    one = [r for r in rtype.relationships if r.to_one]
    if (not rels and not one) or not resources:
        return 0
    batches = stage_resources(rtype, resources, included)
    owner = batches[0]
    stamps: dict[int, Any] = {}
    if "updated_at" in owner.columns:
        pos = owner.columns.index("updated_at") + 1
        stamps = {row[0]: row[pos] for row in owner.rows}
    for rel in one:
        if rel.column in owner.columns:
            at = owner.columns.index(rel.column) + 1
            mirror.table(rtype).write_to_one(
                rel.column, [(row[0], row[at]) for row in owner.rows], stamps
            )
    links = {
        name: pairs for name, pairs in owner.links.items() if any(r.name == name for r in rels)
    }
    # Included copies of listed types are trimmed to their stamp: never written from here.
    whole = [b for b in batches[1:] if b.type in SIDELOADED]
    return mirror.write_sideloads(rtype, whole, links, stamps)


def prune(mirror: MirrorStore) -> dict[str, int]:
    """Remove sideloaded rows that no link of any owner references; returns counts by type."""
    return mirror.prune_unreferenced(SIDELOADED)
