"""Encoding: a JSON value as the mirror stores it, and what identifies one copy of a resource.

The mirror's columns take SQLite's types: booleans as 0/1, objects and arrays as JSON text, an
integer beyond SQLite's 64 bits as a float (`encode`). A copy of a resource is identified by its
`updated_at`, else by a digest of all of it (`version`), which the memo of written rows compares
(`sync.pipeline.seen`). Every function here is pure and runs on the hot path of staging.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from xxhash import xxh3_128_digest

from sync.core.errors import BadResponseError

#: SQLite's integer bounds.
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def encode(value: Any) -> Any:
    """A JSON value as the mirror stores it: booleans 0/1, objects and arrays as JSON text."""
    kind = type(value)  # exact types: this runs once per attribute on the hot path
    if kind is str or value is None:
        return value
    if kind is bool:
        return int(value)
    if kind is dict or kind is list:
        return dumps(value).decode()
    if kind is int and not INT64_MIN <= value <= INT64_MAX:
        return float(value)  # beyond SQLite's integers (a JSON parser reads them as int)
    return value


def dumps(value: Any) -> bytes:
    """`orjson.dumps`, or the standard library's for a value holding an integer beyond 64 bits
    (`decode_listing` keeps every integer exact; orjson cannot write those)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def version(res: dict[str, Any]) -> object:
    """What identifies one copy of a resource: its `updated_at`, else a digest of all of it.

    The digest (128-bit XXH3) is of the resource serialised as it came, so it is the same in
    every process; keys are not sorted (a fifth of the cost): a copy whose keys come in
    another order only looks like a new version, and is written once more.
    """
    attrs = res.get("attributes")
    stamp = attrs.get("updated_at") if isinstance(attrs, dict) else None
    if isinstance(stamp, str):
        return stamp
    return xxh3_128_digest(dumps(res))


def id_or_none(raw: Any) -> int | None:
    """An upstream id as the integer key of the mirror, or None when it is not one (a row of a
    page is then skipped rather than poisoning the page)."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def parse_id(raw: Any) -> int:
    """JSON:API ids are strings; the mirror keys rows by their integer value. An id that is not
    one is an off-spec answer (`BadResponseError`), where an id decides what to fetch or delete."""
    rid = id_or_none(raw)
    if rid is None:
        raise BadResponseError(
            f"the upstream listed a resource whose id {str(raw)[:40]!r} is not an integer",
            hint="off-spec listing; nothing was deleted, and it will be retried on the next run",
        )
    return rid
