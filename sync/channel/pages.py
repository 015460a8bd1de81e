"""JSON:API documents as the client hands them on: a `Page` of resources, validated on arrival.

A body that is not JSON, or not a JSON:API collection (`data` a list of objects with `id`), is a
`BadResponseError` naming what was wrong: a truncated or off-spec page must never be mistaken for
an empty one, which would look like "every row was deleted".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from sync.errors import BadResponseError


@dataclass(frozen=True)
class Page:
    """One page of a JSON:API collection."""

    resources: list[dict[str, Any]]
    included: list[dict[str, Any]]
    meta: dict[str, Any]
    number: int
    last: int
    api_version: str | None


def decode(body: bytes, url: str, status: int) -> Any:
    """Parse a JSON body or raise BadResponseError."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadResponseError(
            f"the upstream sent a body that is not JSON ({exc})",
            url=url,
            status=status,
            hint="a truncated or proxied response; it will be retried on the next run",
        ) from None


def last_page_number(doc: dict[str, Any]) -> int:
    """page[number] of `links.last`, or 1 when the document has none."""
    last = (doc.get("links") or {}).get("last")
    if isinstance(last, dict):
        last = last.get("href")
    if not isinstance(last, str):
        return 1
    values = parse_qs(urlsplit(last).query).get("page[number]")
    try:
        return max(1, int(values[0])) if values else 1
    except ValueError:
        return 1


def to_page(doc: Any, number: int, url: str, status: int, api_version: str | None) -> Page:
    """Validate a collection document and wrap it as a Page."""
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise BadResponseError(
            "the upstream sent a document without a `data` list",
            url=url,
            status=status,
            hint="not a JSON:API collection; check base_url",
        )
    data = doc["data"]
    for item in data:
        if not isinstance(item, dict) or "id" not in item:
            raise BadResponseError(
                "a resource in `data` has no id", url=url, status=status, hint="off-spec page"
            )
    included = doc.get("included") or []
    meta = doc.get("meta") or {}
    return Page(
        resources=data,
        included=[i for i in included if isinstance(i, dict)] if isinstance(included, list) else [],
        meta=meta if isinstance(meta, dict) else {},
        number=number,
        last=last_page_number(doc),
        api_version=api_version,
    )
