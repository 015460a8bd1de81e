"""Webhook notices: the `{data: [...]}` bodies the upstream posts, parsed and validated.

The upstream does not sign notices, so they are only hints (see `sync.jobs.queueworker`); parsing is strict so
that anything off-spec is rejected with a precise reason before it reaches the queue. Unknown
resource types are not errors: they are acknowledged and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from sync.model.catalogue import normalize_type

MAX_ITEMS = 10_000
_MAX_ID = 2**63 - 1


class NoticeError(ValueError):
    """The body is not a notice batch as the spec describes it; the message says why."""


@dataclass(frozen=True)
class WebhookNotice:
    """One item of a notice batch."""

    kind: Literal["update", "deletion"]
    type_name: str | None
    raw_type: str
    resource_id: int
    deletion_id: str | None = None


def _resource_id(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise NoticeError(f"{where}: resource_id must be a positive integer")
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit():
            raise NoticeError(f"{where}: resource_id must be a positive integer")
        digits = value.lstrip("0") or "0"
        if len(digits) > len(str(_MAX_ID)):  # and int() refuses 4,300+ digits
            raise NoticeError(f"{where}: resource_id out of range")
        value = int(digits)
    if not 1 <= value <= _MAX_ID:
        raise NoticeError(f"{where}: resource_id out of range")
    return int(value)


def parse_batch(body: bytes) -> tuple[list[WebhookNotice], list[str]]:
    """Parse one notice body into its valid items and a problem per invalid item.

    One off-spec item must not cost the valid ones beside it (a 400 for the whole batch loses
    them, and repeated 400s get the subscription dropped upstream after 5 attempts). Raises
    NoticeError only for a body that is not a batch at all, or that has no valid item.
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise NoticeError("body is not valid JSON") from None
    if not isinstance(doc, dict):
        raise NoticeError("body must be a JSON object")
    data = doc.get("data")
    if not isinstance(data, list):
        raise NoticeError("`data` must be a list of notices")
    if not data:
        raise NoticeError("`data` is empty")
    if len(data) > MAX_ITEMS:
        raise NoticeError(f"more than {MAX_ITEMS} notices in one body")
    out: list[WebhookNotice] = []
    problems: list[str] = []
    for i, item in enumerate(data):
        try:
            out.append(_item(item, f"data[{i}]"))
        except NoticeError as exc:
            problems.append(str(exc))
    if not out:
        raise NoticeError(problems[0] if len(problems) == 1 else f"no valid notice: {problems[0]}")
    return out, problems


def parse_notices(body: bytes) -> list[WebhookNotice]:
    """The valid notices of one body; NoticeError names the problem when there is none."""
    return parse_batch(body)[0]


def _item(item: Any, where: str) -> WebhookNotice:
    """One notice item, or NoticeError naming what is off-spec in it."""
    if not isinstance(item, dict):
        raise NoticeError(f"{where} must be an object")
    kind = item.get("type")
    if kind not in ("updates", "deletions"):
        raise NoticeError(f"{where}.type must be 'updates' or 'deletions'")
    attrs = item.get("attributes")
    if not isinstance(attrs, dict):
        raise NoticeError(f"{where}.attributes is missing")
    raw_type = attrs.get("resource_type")
    if not isinstance(raw_type, str) or not raw_type.strip() or len(raw_type) > 100:
        raise NoticeError(f"{where}: resource_type must be a non-empty string")
    rid = _resource_id(attrs.get("resource_id"), where)
    deletion_id = item.get("id")
    return WebhookNotice(
        kind="update" if kind == "updates" else "deletion",
        type_name=normalize_type(raw_type),
        raw_type=raw_type,
        resource_id=rid,
        deletion_id=str(deletion_id) if isinstance(deletion_id, str | int) else None,
    )
