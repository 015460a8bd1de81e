"""The management API's field rules: which fields an article or message update may set, and how.

The spec's tables (`../shared/spec/management-api-v1.md`: Article, Message, Channel (request))
say which fields are writable, of what kind, and nullable or not; `article_field_error` and
`message_errors` turn an update body into the 422 `details` the spec shows, by field. The
publication status the spec leaves open is derived here too (`publication_status`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sync.model.articles import ARTICLE_READ_ONLY
from sync.model.stamps import is_date_time

# The writable fields of Article as the spec's table gives them: (kind, nullable).
ARTICLE_WRITABLE: dict[str, tuple[str, bool]] = {
    "locales": ("strings", True),
    "products": ("strings", True),
    "status": ("status", False),
    "visible_since": ("date-time", True),
    "visible_until": ("date-time", True),
    "visible_in_list": ("boolean", False),
    "topic_relevant_until": ("date-time", True),
    **{k: ("localized", True) for k in ("title", "slug", "teaser", "body", "headline")},
    "published_at": ("date-time", True),
    "prototype_id": ("unset only", True),  # "manually it can only be unset"
    "external_master": ("string", False),
    "us_legacy_data": ("object", True),
    "tag_ids": ("tag ids", True),
    "category_ids": ("integers", False),
}
ARTICLE_FIELDS = frozenset(ARTICLE_WRITABLE) | frozenset(ARTICLE_READ_ONLY)
STATUSES = ("draft", "published", "unpublished")
MESSAGE_WRITABLE = frozenset(
    {"name", "shorten_urls", "track_in_shortener", "marketing", "campaign_id", "channels"}
)
CHANNEL_WRITABLE = frozenset({"type", "include_footer", "sender"})
SENDER_WRITABLE = frozenset({"from_email", "from_name"})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, str) for i in v)


def _localized(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(i, str | None) for i in v.values())


def _tag_ids(v: Any) -> bool:
    return isinstance(v, list) and all(_is_int(i) and i >= 1 for i in v)


def _integers(v: Any) -> bool:
    return isinstance(v, list) and all(_is_int(i) for i in v)


def _status(v: Any) -> bool:
    return v in STATUSES


def _boolean(v: Any) -> bool:
    return isinstance(v, bool)


def _string(v: Any) -> bool:
    return isinstance(v, str)


def _object(v: Any) -> bool:
    return isinstance(v, dict)


KIND_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "strings": (_strings, "must be an array of strings"),
    "status": (_status, f"must be one of {', '.join(STATUSES)}"),
    "date-time": (is_date_time, "must be an RFC 3339 date-time"),
    "boolean": (_boolean, "must be a boolean"),
    "localized": (_localized, "must be an object of language code to string or null"),
    "string": (_string, "must be a string"),
    "object": (_object, "must be an object"),
    "tag ids": (_tag_ids, "items must be integers >= 1"),
    "integers": (_integers, "must be an array of integers"),
}


def _integer(v: Any) -> bool:
    return _is_int(v)


# The message request's fields as the spec lists them (Message, Channel (request)): none is
# marked required, none nullable but `marketing` ("null or value", the value's shape not shown:
# any JSON value is taken, so it has no check here).
MESSAGE_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (_string, "must be a string"),
    "shorten_urls": (_boolean, "must be a boolean"),
    "track_in_shortener": (_boolean, "must be a boolean"),
    "campaign_id": (_integer, "must be an integer"),
}
CHANNEL_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "type": (_string, "must be a string"),
    "include_footer": (_boolean, "must be a boolean"),
}


def message_errors(changes: dict[str, Any]) -> dict[str, list[str]]:
    """Every problem of a message update body, by field (`channels[0].sender.from_name`)."""
    details: dict[str, list[str]] = {
        k: ["is not writable"] for k in sorted(set(changes) - MESSAGE_WRITABLE)
    }

    def check(where: str, value: Any, rule: tuple[Callable[[Any], bool], str]) -> None:
        if value is None:
            details[where] = ["can't be null"]
        elif not rule[0](value):
            details[where] = [rule[1]]

    for key, rule in MESSAGE_CHECKS.items():
        if key in changes:
            check(key, changes[key], rule)
    if "channels" not in changes:
        return details
    channels = changes["channels"]
    if not (isinstance(channels, list) and all(isinstance(c, dict) for c in channels)):
        details["channels"] = [
            "can't be null" if channels is None else "must be an array of channels"
        ]
        return details
    for i, channel in enumerate(channels):
        at = f"channels[{i}]"
        for k in sorted(set(channel) - CHANNEL_WRITABLE):
            details[f"{at}.{k}"] = ["is not writable"]
        for key, rule in CHANNEL_CHECKS.items():
            if key in channel:
                check(f"{at}.{key}", channel[key], rule)
        if "sender" not in channel:
            continue
        sender = channel["sender"]
        if not isinstance(sender, dict):
            details[f"{at}.sender"] = ["can't be null" if sender is None else "must be an object"]
            continue
        for k in sorted(set(sender) - SENDER_WRITABLE):
            details[f"{at}.sender.{k}"] = ["is not writable"]
        for k in sorted(SENDER_WRITABLE & set(sender)):
            check(f"{at}.sender.{k}", sender[k], (_string, "must be a string"))
    return details


def article_field_error(key: str, value: Any) -> str | None:
    """Why `value` is not allowed for the writable Article field `key`, or None."""
    kind, nullable = ARTICLE_WRITABLE[key]
    if value is None:
        return None if nullable else "can't be null"
    if kind == "unset only":
        return "can only be unset (null)"
    check, message = KIND_CHECKS[kind]
    return None if check(value) else message


def publication_status(article: dict[str, Any], now: float) -> str:
    """The emulator's derivation (the spec leaves it open): anything not published is draft; a
    published article is scheduled before visible_since, expired from visible_until on."""
    if article.get("status") != "published":
        return "draft"
    since, until = (
        datetime.fromisoformat(v.upper().replace("Z", "+00:00")).timestamp()
        if isinstance(v, str)
        else None
        for v in (article.get("visible_since"), article.get("visible_until"))
    )
    if until is not None and until <= now:
        return "expired"
    if since is not None and since > now:
        return "scheduled"
    return "published"
