"""How one resource is written: its JSON:API object, its bytes, and the resources it names.

`resource_obj` builds a resource object (attributes, relationship links, linkage for what is
included, `meta`); `encode_plain` writes the plain form (every attribute, relationships as links
only: what a listing without `include` or `fields` serves) from its type's byte template around
the stored attribute bytes; `encode_resource` writes any variant, caching all but those whose
linkage is computed from other rows in the data set's bounded LRU (`sync.emulator.encodings`).
"""

from __future__ import annotations

from typing import Any

import orjson

from sync.emulator.encodings import Templates
from sync.emulator.records import Rec
from sync.emulator.rows import Rows
from sync.emulator.spec import (
    DEAL_STORE,
    INVERSE,
    JOB_META,
    MALL_MEMBERS,
    RELATIONSHIPS,
    TARGET,
    TO_ONE,
    path_of,
)
from sync.emulator.stamps import stamp_form
from sync.model.stamps import ABSOLUTE


def linkage(data: Rows, rec: Rec, name: str) -> Any:
    """Relationship `data` for an included relationship."""
    value = data.linkage(rec, name)
    target = TARGET.get(name, name)
    if name in TO_ONE:
        return {"type": target, "id": str(value)} if isinstance(value, int) else None
    return [{"type": target, "id": str(i)} for i in value] if isinstance(value, list) else []


def unlinked(data: Rows, type_name: str, name: str) -> bool:
    """Whether `type_name`'s relationship `name` is served without linkage, whatever `include`
    asks (`Hard.deals_without_stores`)."""
    return data.hard.deals_without_stores and (type_name, name) in DEAL_STORE


def derived(type_name: str, include: tuple[str, ...]) -> bool:
    """Whether `include` names a relationship of `type_name` whose linkage is computed from
    other resources (an inverse, a mall's members): such encodings are never cached."""
    return any(
        (type_name, n) in INVERSE or (type_name == "malls" and n in MALL_MEMBERS) for n in include
    )


def related(data: Rows, rec: Rec, name: str) -> list[Rec]:
    value = data.linkage(rec, name)
    target = TARGET.get(name, name)
    ids = [value] if isinstance(value, int) else value if isinstance(value, list) else []
    store = data.by_type.get(target, {})
    return [store[i] for i in ids if i in store]


def resource_obj(
    data: Rows,
    base: str,
    rec: Rec,
    include: tuple[str, ...],
    fields: tuple[str, ...] | None,
    forms: bool = False,
) -> dict[str, Any]:
    """The JSON:API resource object for one record (`forms`: see `stamp_form`)."""
    path = path_of(rec.type)
    attrs = rec.decoded()
    if fields is not None:
        attrs = {k: v for k, v in attrs.items() if k in fields}
    if forms:
        attrs = {
            k: stamp_form(v, rec.id + i) if k in ABSOLUTE and isinstance(v, str) else v
            for i, (k, v) in enumerate(attrs.items())
        }
    obj: dict[str, Any] = {
        "id": str(rec.id),
        "type": rec.type,
        "links": {"self": f"{base}/{path}/{rec.id}"},
        "attributes": attrs,
    }
    rels: dict[str, Any] = {}
    for name in RELATIONSHIPS.get(rec.type, ()):
        if fields is not None and name not in fields:
            continue
        hy = name.replace("_", "-")
        entry: dict[str, Any] = {
            "links": {
                "self": f"{base}/{path}/{rec.id}/relationships/{hy}",
                "related": f"{base}/{path}/{rec.id}/{hy}",
            }
        }
        if name in include and not unlinked(data, rec.type, name):
            entry["data"] = linkage(data, rec, name)
        rels[name] = entry
    if rels:
        obj["relationships"] = rels
    if rec.meta:
        obj["meta"] = rec.meta
    return obj


def variant(include: tuple[str, ...], fields: tuple[str, ...] | None) -> str:
    """The cache key of one encoding of a resource (its include and sparse fieldset)."""
    return ",".join(include) if fields is None else f"{','.join(include)};{','.join(fields)}"


def encode_plain(data: Rows, base: str, recs: list[Rec]) -> list[bytes]:
    """The plain form (every attribute, relationships as links) of `recs`: their types'
    templates with each id put in, around the stored attribute bytes."""
    templates = data.templates
    if templates.base != base:
        templates = data.templates = Templates(base)
    out = []
    last = ""
    head: list[bytes] = []
    tail: list[bytes] = []
    for rec in recs:
        if rec.type != last:
            last = rec.type
            head, tail = templates.parts(last, path_of(last), RELATIONSHIPS.get(last, ()), rec.meta)
        if rec.meta is not None and rec.meta is not JOB_META:  # not what the template holds
            out.append(orjson.dumps(resource_obj(data, base, rec, (), None)))
            continue
        rid = str(rec.id).encode()
        out.append(b"".join((rid.join(head), rec.blob, rid.join(tail))))
    return out


def encode_resource(
    data: Rows,
    base: str,
    rec: Rec,
    include: tuple[str, ...],
    fields: tuple[str, ...] | None,
    key: str | None = None,
    forms: bool = False,
) -> bytes:
    """Encoded resource (`key`: `variant(include, fields)`, passed in by callers that encode
    many resources of one variant; `forms`: see `stamp_form`). The plain form comes from the
    type's template; other variants are cached in `data.encodings` by record revision, except
    those with linkage computed from other resources."""
    if not include and fields is None and not forms and (rec.meta is None or rec.meta is JOB_META):
        return encode_plain(data, base, [rec])[0]
    if include and derived(rec.type, include):
        return orjson.dumps(resource_obj(data, base, rec, include, fields, forms))
    if key is None:
        key = variant(include, fields)
    if data.hard.deals_without_stores and any(unlinked(data, rec.type, n) for n in include):
        key += "~unlinked"  # the switch may change at run time: never the other encoding
    cache_key = (rec.type, rec.id, rec.rev, f"{key}~" if forms else key)
    blob = data.encodings.get(cache_key)
    if blob is None:
        blob = orjson.dumps(resource_obj(data, base, rec, include, fields, forms))
        data.encodings.put(cache_key, blob)
    return blob
