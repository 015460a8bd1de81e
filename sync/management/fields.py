"""The writable fields of the management API's updates, checked before anything is sent.

An article or message update comes from a user's JSON file (`ccsync article update --file`). The
models here hold it to the spec: read-only fields are refused by name, unknown fields as "not a
writable field", enums and types are checked, `tag_ids` items must be >= 1, date-times must be
RFC 3339, and a field the spec does not make nullable may be left out but not sent as null.
`load_update` reads a file and raises `ConfigError` (exit 2) naming every problem and the fix;
`article_problems` and `message_problems` give the same verdict, by field, for a body about to be
sent (`sync.management.client`). No I/O but reading the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import ErrorDetails

from sync.core.errors import ConfigError
from sync.model.articles import ARTICLE_READ_ONLY
from sync.model.stamps import is_date_time

Localized = dict[str, str | None]
ARTICLE_NOT_NULLABLE = ("status", "visible_in_list", "external_master", "category_ids")
ARTICLE_DATE_TIMES = ("visible_since", "visible_until", "topic_relevant_until", "published_at")


class _Update(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ArticleUpdate(_Update):
    """The writable fields of an Article (spec: management API v1, Article), with the spec's
    nullability: `status`, `visible_in_list`, `external_master` and `category_ids` may be left
    out but not sent as null; `prototype_id` can only be unset (null); date-times are RFC 3339."""

    locales: list[str] | None = None
    products: list[str] | None = None
    status: Literal["draft", "published", "unpublished"] | None = None
    visible_since: str | None = None
    visible_until: str | None = None
    visible_in_list: bool | None = None
    topic_relevant_until: str | None = None
    title: Localized | None = None
    slug: Localized | None = None
    teaser: Localized | None = None
    body: Localized | None = None
    headline: Localized | None = None
    published_at: str | None = None
    prototype_id: None = None
    external_master: str | None = None
    us_legacy_data: dict[str, Any] | None = None
    tag_ids: list[int] | None = None
    category_ids: list[int] | None = None

    @field_validator(*ARTICLE_NOT_NULLABLE, mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only fields present in the file reach this: leaving one out is fine, null is not.
        if value is None:
            raise ValueError("may not be null (not nullable in the spec); leave it out instead")
        return value

    @field_validator("prototype_id", mode="before")
    @classmethod
    def _only_unset(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("can only be unset (null): a content prototype is not set by hand")
        return value

    @field_validator("tag_ids")
    @classmethod
    def _tag_ids(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(t < 1 for t in value):
            raise ValueError("every item must be an integer >= 1")
        return value

    @field_validator(*ARTICLE_DATE_TIMES)
    @classmethod
    def _date_time(cls, value: str | None) -> str | None:
        if value is not None and not is_date_time(value):
            raise ValueError(
                f"{value!r} is not an RFC 3339 date-time (like 2026-05-01T09:00:00.000Z)"
            )
        return value


class _PartialUpdate(_Update):
    """Every field optional (the spec marks none of the message request required), none
    nullable except those in `NULLABLE` (the spec says "null or value" of `marketing` only)."""

    NULLABLE: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        # Only fields present in the file reach this: leaving one out is fine, null is not.
        if value is None and info.field_name not in cls.NULLABLE:
            raise ValueError("may not be null (not nullable in the spec); leave it out instead")
        return value


class Sender(_PartialUpdate):
    from_email: str | None = None
    from_name: str | None = None


class Channel(_PartialUpdate):
    type: str | None = None
    include_footer: bool | None = None
    sender: Sender | None = None


class MessageUpdate(_PartialUpdate):
    """The writable part of a Message (spec: Message, Channel (request)): any subset of the
    fields, with the spec's types; `marketing` is "null or value", and since the value's shape
    is not shown, any JSON value (an object, a string, ...) is passed through as given."""

    NULLABLE = frozenset({"marketing"})

    name: str | None = None
    shorten_urls: bool | None = None
    track_in_shortener: bool | None = None
    marketing: Any = None
    campaign_id: int | None = None
    channels: list[Channel] | None = None


def _what(err: ErrorDetails) -> str:
    """What is wrong with one field, as the spec would say it."""
    if err["type"] == "extra_forbidden":
        return "not a writable field"
    return str(err["msg"]).removeprefix("Value error, ")


def _explain(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(file)'}: {_what(err)}" for err in exc.errors()
    )


def load_update(path: Path, kind: Literal["article", "message"]) -> dict[str, Any]:
    """Read and validate an update file; ConfigError (exit 2) naming every problem and the fix."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} not found; pass the JSON file with --file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a readable JSON file: {exc}") from None
    if isinstance(doc, dict) and set(doc) == {kind}:
        doc = doc[kind]  # accept both {"article": {...}} and the bare object
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} must hold a JSON object with the {kind}'s fields")
    if kind == "article":
        read_only = [k for k in ARTICLE_READ_ONLY if k in doc]
        if read_only:
            raise ConfigError(
                f"{path}: {', '.join(read_only)} {'is' if len(read_only) == 1 else 'are'} read-only "
                "(produced by the service); remove them from the file"
            )
    model: type[_Update] = ArticleUpdate if kind == "article" else MessageUpdate
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_explain(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return doc


def article_problems(article: dict[str, Any]) -> dict[str, object]:
    """What the spec forbids in an article update body, by field (empty when it may be sent)."""
    problems: dict[str, list[str]] = {
        k: ["is read-only"] for k in ARTICLE_READ_ONLY if k in article
    }
    return _problems(
        ArticleUpdate, {k: v for k, v in article.items() if k not in problems}, problems, "article"
    )


def message_problems(message: dict[str, Any]) -> dict[str, object]:
    """What the spec forbids in a message update body, by field (empty when it may be sent)."""
    return _problems(MessageUpdate, message, {}, "message")


def _problems(
    model: type[_Update], doc: dict[str, Any], problems: dict[str, list[str]], kind: str
) -> dict[str, object]:
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]] or [kind]
            what = _what(err)
            problems.setdefault(loc[0], []).append(
                f"{'.'.join(loc[1:])}: {what}" if len(loc) > 1 else what
            )
    return dict(problems)
