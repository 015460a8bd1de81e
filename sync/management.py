"""The management API v1: press release listing, article update and message update.

`ManagementClient` sends the context headers the spec lists (X-User-Agent, X-Product-Name,
X-Loyalty-Club-Slug, X-Customer, X-Locale) and the credentials (Authorization: Bearer and/or
X-Client-Authorization), through the same retrying transport as the Channel Content API client.
The update models validate a user's file *before* anything is sent: read-only fields are refused
by name, enums and types are checked, `tag_ids` items must be >= 1. A 404 becomes
`NotFoundError` with the API's record-not-found message, a 422 `InvalidParametersError` carrying
every entry of `details`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sync.channel.transport import Response, Transport
from sync.config import ManagementSettings
from sync.errors import (
    BadResponseError,
    ConfigError,
    InvalidParametersError,
    NotFoundError,
    UpstreamError,
)

ARTICLE_READ_ONLY = (
    "id",
    "customer_id",
    "sorting_priority",
    "image",
    "url",
    "publication_status",
    "created_at",
    "updated_at",
    "archived_at",
)
Localized = dict[str, str | None]


class _Update(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ArticleUpdate(_Update):
    """The writable fields of an Article (spec: management API v1, Article)."""

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
    prototype_id: int | None = None
    external_master: str | None = None
    us_legacy_data: dict[str, Any] | None = None
    tag_ids: list[int] | None = Field(default=None)
    category_ids: list[int] | None = None

    def model_post_init(self, __context: Any) -> None:
        if self.tag_ids is not None and any(t < 1 for t in self.tag_ids):
            raise ValueError("tag_ids: every item must be an integer >= 1")


class Sender(_Update):
    from_email: str
    from_name: str


class Channel(_Update):
    type: str
    include_footer: bool
    sender: Sender


class MessageUpdate(_Update):
    """The writable part of a Message."""

    name: str | None = None
    shorten_urls: bool | None = None
    track_in_shortener: bool | None = None
    marketing: None = None
    campaign_id: int | None = None
    channels: list[Channel] | None = None


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(file)"
        if err["type"] == "extra_forbidden":
            parts.append(f"{where}: not a writable field")
        else:
            parts.append(f"{where}: {str(err['msg']).removeprefix('Value error, ')}")
    return "; ".join(parts)


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


class ManagementClient:
    """Authenticated, retried access to the three management operations."""

    def __init__(
        self,
        settings: ManagementSettings,
        *,
        retry_budget: float = 60.0,
        max_backoff: float = 10.0,
        timeout: float = 30.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        fail_fast: bool = True,
    ) -> None:
        self.settings = settings
        self._fail_fast = fail_fast
        self._session: aiohttp.ClientSession | None = None
        self._transport: Transport | None = None
        self._opts = {"retry_budget": retry_budget, "max_backoff": max_backoff, "timeout": timeout}
        self._sleep = sleep

    async def __aenter__(self) -> ManagementClient:
        self._session = aiohttp.ClientSession()
        self._transport = Transport(
            self._session,
            concurrency=2,
            timeout=self._opts["timeout"],
            retry_budget=self._opts["retry_budget"],
            max_backoff=self._opts["max_backoff"],
            sleep=self._sleep,
            clock=time.monotonic,
            base_url_key="[management] base_url",
            fail_fast=self._fail_fast,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()

    def headers(self, locale: str | None = None) -> dict[str, str]:
        """The context and credential headers of every request."""
        s = self.settings
        h = {
            "Accept": "application/json",
            "X-User-Agent": s.client_id,
            "X-Product-Name": s.product,
            "X-Loyalty-Club-Slug": s.loyalty_club,
        }
        if s.customer:
            h["X-Customer"] = s.customer
        if s.bearer_token is not None:
            h["Authorization"] = f"Bearer {s.bearer_token.get_secret_value()}"
        if s.client_token is not None:
            h["X-Client-Authorization"] = s.client_token.get_secret_value()
        if locale:
            h["X-Locale"] = locale
        return h

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        locale: str | None = None,
    ) -> Any:
        assert self._transport is not None, "use `async with ManagementClient(...)`"
        url = f"{self.settings.base_url}{path}"
        resp: Response = await self._transport.send(
            method, url, params=(lambda: params or {}), json=body, headers=self.headers(locale)
        )
        try:
            doc = orjson.loads(resp.body) if resp.body else {}
        except orjson.JSONDecodeError:
            raise BadResponseError(
                "the management API sent a body that is not JSON", url=url, status=resp.status
            ) from None
        if resp.status == 404:
            message = doc.get("error") if isinstance(doc, dict) else None
            raise NotFoundError(str(message or "Record not found"), url=url, status=404)
        if resp.status == 422:
            details = doc.get("details") if isinstance(doc, dict) else None
            raise InvalidParametersError(
                str(doc.get("error", "Invalid parameters"))
                if isinstance(doc, dict)
                else "Invalid parameters",
                details=details if isinstance(details, dict) else {},
                url=url,
            )
        if resp.status in (401, 403):
            raise UpstreamError(
                "the management API refused the credentials",
                url=url,
                status=resp.status,
                hint="check [management] bearer_token / client_token and the product and club",
            )
        if resp.status >= 400:
            raise UpstreamError(f"request rejected: {doc}", url=url, status=resp.status)
        return doc

    async def press_releases(self, locale: str) -> AsyncIterator[list[dict[str, Any]]]:
        """Every page of the loyalty club's press releases in `locale`, following pagination_info."""
        page_no = 1
        while True:
            doc = await self._send(
                "GET",
                "/v1/content/press_releases",
                params={"page_no": str(page_no), "per_page": str(self.settings.per_page)},
                locale=locale,
            )
            items, info = doc.get("press_releases"), doc.get("pagination_info")
            if not isinstance(items, list) or not isinstance(info, dict):
                raise BadResponseError("press release list without press_releases/pagination_info")
            yield [i for i in items if isinstance(i, dict) and isinstance(i.get("id"), int)]
            if info.get("is_last_page") or info.get("next_page") is None or not items:
                return
            page_no = int(info["next_page"])

    async def update_article(
        self, article_id: int, article: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        params = {"dry_run": "true"} if dry_run else {}
        doc = await self._send(
            "PUT",
            f"/v1/content/management/articles/{article_id}",
            params=params,
            body={"article": article},
        )
        return dict(doc.get("article") or {})

    async def update_message(
        self, service: str, message_id: int, message: dict[str, Any], *, archived: str | None = None
    ) -> dict[str, Any]:
        params = {"archived": archived} if archived is not None else {}
        doc = await self._send(
            "PUT", f"/v1/messages/{service}/{message_id}", params=params, body={"message": message}
        )
        return dict(doc.get("message") or {})


async def mirror_press_releases(
    client: ManagementClient, store: Any, locales: list[str]
) -> dict[str, tuple[int, int]]:
    """List every press release in each locale into the mirror; returns locale -> (rows, removed).

    `store` is a `sync.store.press.PressReleases`. Rows the complete listing did not return are
    removed afterwards; an interrupted listing removes nothing.
    """
    from sync.stamps import now_iso

    out: dict[str, tuple[int, int]] = {}
    for locale in locales:
        run = now_iso()
        rows = 0
        async for page in client.press_releases(locale):
            rows += store.write(locale, run, page)
        out[locale] = (rows, store.prune(locale, run, rows))
    return out
