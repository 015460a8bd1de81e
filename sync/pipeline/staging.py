"""Staging: a page's resources turned into the rows the mirror's page write binds, with no database.

Each resource becomes one tuple of column values (id first; `sync.pipeline.encoding`), plus its
to-many links (`sync.pipeline.linkage`); its stamps and declared values are held to the spec on
the way (`sync.pipeline.checks`). The included resources are grouped by type and staged the same
way, each with its version, less those the memo of written rows holds (`sync.pipeline.seen`).
Staging needs no connection and returns plain picklable values (`sync.pipeline.batches`), which
is what lets a backfill stage pages in a worker process on another core (`sync.pipeline.pageworker`,
`sync.pipeline.pagepool`) while the main process only binds the rows (`Mirror.write_staged`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sync.channel.pages import decode_listing, to_page
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.columns import VALUE_KINDS
from sync.pipeline.batches import Staged, StagedPage
from sync.pipeline.checks import check_stamps, check_values
from sync.pipeline.encoding import encode, id_or_none, version
from sync.pipeline.linkage import take_linkage
from sync.pipeline.seen import Seen, written_already


def safe_name(name: str) -> bool:
    """Attribute names usable as a column and a JSON path (no double quotes, brackets or NUL)."""
    return bool(name) and not any(c in name for c in '"[]\x00')


def _fits(folded: set[str], key: str) -> bool:
    """Whether `key` can be a column beside those whose lower-case names are `folded`: SQLite names are case-insensitive, so
    `Title` cannot sit beside `title` (the first spelling seen is stored, the other is not)."""
    low = key.lower()
    return low != "id" and low not in folded and safe_name(key)


def stage(
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    mall_id: int | None,
    *,
    with_versions: bool = False,
) -> Staged:
    """Stage resources of one type (`mall_id` is stored on each row of a mall-scoped type)."""
    b = Staged(rtype.name, versions=[] if with_versions else None)
    keys: dict[str, None] = {}  # columns in the order first seen
    folded: set[str] = set()
    docs: list[dict[str, Any]] = []
    for res in resources:
        rid = id_or_none(res.get("id"))
        if rid is None:
            continue  # not an id the mirror can key: skip rather than poison the page
        doc: dict[str, Any] = res.get("attributes") or {}
        extra: dict[str, Any] = {}
        bad = check_stamps(rid, doc, extra)
        if bad is not None:
            b.refused.append(bad)  # logged by the writer; the mirror keeps its copy
            continue
        meta = res.get("meta")
        if meta:
            extra.update((f"meta_{k}", v) for k, v in meta.items())
        if mall_id is not None:
            extra["mall_id"] = mall_id
        rels = res.get("relationships")
        if rels:
            take_linkage(rtype, rid, rels, extra, b.links)
        if extra:
            doc = {**doc, **extra}
        if not doc.keys() <= keys.keys():
            for k in doc:
                if k not in keys and _fits(folded, k):
                    keys[k] = None
                    folded.add(k.lower())
        b.ids.append(rid)
        docs.append(doc)
        if b.versions is not None:
            stamp = doc.get("updated_at")
            b.versions.append(stamp if isinstance(stamp, str) else version(res))
    b.columns = cols = tuple(sorted(keys))
    rows = b.rows
    for rid, doc in zip(b.ids, docs, strict=True):
        rows.append((rid, *[encode(doc.get(c)) for c in cols]))
    kinds = VALUE_KINDS.get(rtype.name)
    if kinds and docs:
        docs = check_values(b, docs, kinds, keys)
    samples = b.samples
    for k in keys:  # first non-null value of each column, in document order
        for doc in docs:
            value = doc.get(k)
            if value is not None:
                samples[k] = encode(value)
                break
        else:
            samples[k] = None
    return b


def stage_resources(
    rtype: ResourceType,
    resources: Sequence[dict[str, Any]],
    included: Sequence[dict[str, Any]] = (),
    mall_id: int | None = None,
    *,
    skip: Collection[str] = (),
    written: Seen | None = None,
) -> list[Staged]:
    """The batches of one page: the listed type's, then one per known included type.

    Included resources of the types in `skip` are left out (a backfill's trimmed sideloads,
    `catalogue.sideload_trim`: partial copies of rows their own listing brings whole), and so
    are those `written` already holds at the same version (a worker's `Sent.written`): images
    and tags repeat on page after page, and most copies were staged only to be dropped by
    `Sent.filter` (at 200k, 378k included copies staged for 143k sent; now 144k staged).
    """
    batches = [stage(rtype, resources, mall_id if rtype.level == "mall" else None)]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for res in included:
        name = res.get("type")
        if isinstance(name, str) and name in catalogue.TYPES and name not in skip:
            by_type.setdefault(name, []).append(res)
    if written is not None and len(written):
        for name, items in by_type.items():
            ids = [id_or_none(res.get("id")) for res in items]
            held = written.versions_of(name, ids)
            if held:
                by_type[name] = [
                    res
                    for res, rid in zip(items, ids, strict=True)
                    if rid is None or not written_already(res, held.get(rid), written)
                ]
        by_type = {name: items for name, items in by_type.items() if items}
    for name, items in by_type.items():
        batches.append(stage(catalogue.TYPES[name], items, None, with_versions=True))
    return batches


def stage_listing(
    type_name: str,
    body: bytes,
    *,
    number: int,
    url: str,
    status: int,
    mall_id: int | None,
    skip: Collection[str] = (),
    written: Seen | None = None,
) -> StagedPage:
    """Parse, validate and stage one listing page from its raw body (`skip`, `written`: see
    `stage_resources`).

    Raises `BadResponseError` for a body that is not a JSON:API collection, exactly as the
    client's `list_page` does.
    """
    page = to_page(decode_listing(body, url, status), number, url, status, None)
    rtype = catalogue.TYPES[type_name]
    return StagedPage(
        batches=stage_resources(
            rtype, page.resources, page.included, mall_id, skip=skip, written=written
        ),
        resources=len(page.resources),
        number=number,
        last=page.last,
        scripts=page.meta.get("scripts"),
    )
