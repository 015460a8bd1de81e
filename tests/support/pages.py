"""Pages as the upstream serves them, written to a mirror the way the jobs write them.

The store binds staged rows and never stages them (`sync.store`): the jobs stage a page with
`sync.pipeline.staging` and hand the batches to `Mirror.write_staged`. Tests that write a page of
resources do the same through `write_page`, so none of them repeats the two steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sync.model.catalogue import ResourceType
from sync.pipeline.staging import stage_resources
from sync.store import Mirror, PageCheckpoint, WriteResult


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
