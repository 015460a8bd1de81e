"""Pages as the upstream serves them, written to a mirror the way the jobs write them.

The store binds staged rows and never stages them (`sync.store`): the jobs stage a page with
`sync.pipeline.staging` and hand the batches to `Mirror.write_staged`. Tests that write a page of
resources do the same through `write_page`, so none of them repeats the two steps; `res` builds
one resource as the upstream serves it, and DEALS, EVENTS, STORES and JOBS are the types the
store suites write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.pipeline.staging import stage_resources
from sync.store import Mirror, PageCheckpoint, WriteResult

DEALS = catalogue.TYPES["deals"]
EVENTS = catalogue.TYPES["events"]
STORES = catalogue.TYPES["stores"]
JOBS = catalogue.TYPES["job_listings"]


def res(
    rid: int, updated: str = "2026-01-01T00:00:00.000Z", type_: str = "deals", **attrs: Any
) -> dict[str, Any]:
    return {
        "id": str(rid),
        "type": type_,
        "attributes": {"title": f"t{rid}", "updated_at": updated, **attrs},
    }


def write_page(
    mirror: Mirror,
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    included: Sequence[dict[str, Any]] = (),
    *,
    mall_id: int | None = None,
    scripts: Any = None,
    checkpoint: PageCheckpoint | None = None,
) -> WriteResult:
    """Stage one page (rows, included resources) and write it with its scripts and checkpoint
    in one transaction, as `Mirror.write_page` did before the store stopped staging."""
    return mirror.write_staged(
        stage_resources(rtype, resources, included, mall_id), scripts=scripts, checkpoint=checkpoint
    )
