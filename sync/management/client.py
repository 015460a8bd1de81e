"""The management API v1: press release listing, article update and message update.

`ManagementClient` sends the context headers the spec lists (X-User-Agent, X-Product-Name,
X-Loyalty-Club-Slug, X-Customer, X-Locale) and the credentials (Authorization: Bearer and/or
X-Client-Authorization), through the same retrying transport as the Channel Content API client.
The two operations the spec labels "user token" (the press release list, the message update)
refuse to start without one (`ManagementSettings.require_user_token`). Every value that lands in
a path is percent-encoded as one segment. The update models validate a user's file *before*
anything is sent: read-only fields are refused by name, enums and types are checked, `tag_ids`
items must be >= 1. A 404 becomes `NotFoundError` with the API's record-not-found message, a 422
`InvalidParametersError` carrying every entry of `details`.

The press release list is asked for in ascending id order, a guess (the spec leaves the values of
`sort_by[]` open): an upstream refusing it is walked in its own order instead, and the outcome is
remembered for the process (`sort_outcome`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from sync.channel.transport import Response, Transport
from sync.core.config import ManagementSettings
from sync.core.errors import (
    BadResponseError,
    ConfigError,
    InvalidParametersError,
    NotFoundError,
    UpstreamError,
)
from sync.core.logs import get_logger
from sync.model.stamps import is_date_time

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
ARTICLE_NOT_NULLABLE = ("status", "visible_in_list", "external_master", "category_ids")
ARTICLE_DATE_TIMES = ("visible_since", "visible_until", "topic_relevant_until", "published_at")
# The spec leaves the values of sort_by[] / sort_directions[] open; ascending id is the order
# the emulator documents and the one a walk can check (see `Walk`). Sent as a probe: see
# `ManagementClient.press_releases` for the fallback.
PRESS_ORDER = {"sort_by[]": "id", "sort_directions[]": "asc"}
PRESS_PATH = "/v1/content/press_releases"
log = get_logger("sync.management")

# base_url -> whether that upstream took PRESS_ORDER; learned on a walk's first page, kept for
# the life of the process (a restart asks again).
_sort_outcomes: dict[str, bool] = {}


def sort_outcome(base_url: str) -> bool | None:
    """Whether the upstream at `base_url` honoured `sort_by[]` in this process (None: not asked yet)."""
    return _sort_outcomes.get(base_url)


def forget_sort_outcomes() -> None:
    """Forget every remembered outcome (tests; the next walk asks again)."""
    _sort_outcomes.clear()


def _remember_sort(base_url: str, honoured: bool, refused_status: int | None) -> None:
    if _sort_outcomes.get(base_url) == honoured:
        return
    _sort_outcomes[base_url] = honoured
    if honoured:
        log.info("press_releases_sort_honoured", order="sort_by[]=id&sort_directions[]=asc")
    else:
        log.warning(
            "press_releases_sort_refused",
            status=refused_status,
            fallback="listed in the upstream's own order; rows it does not return are removed "
            "only when the whole list fits on one page",
        )


def _refuses_sort(resp: Response, *, first_page: bool) -> bool:
    """Whether an answer to a request carrying PRESS_ORDER refuses it: a 4xx whose body names
    `sort_by` or `sort_directions`, or any 400/422 to a walk's first page (whatever its body
    says: the retry without them tells whether the order was the problem)."""
    if not 400 <= resp.status < 500:
        return False
    text = resp.body.decode("utf-8", "replace")
    if "sort_by" in text or "sort_directions" in text:
        return True
    return first_page and resp.status in (400, 422)


class _SortRefused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def segment(value: object) -> str:
    """`value` as one path segment: every reserved character percent-encoded, `/` included."""
    return quote(str(value), safe="")


@dataclass
class Walk:
    """What one walk of the press release list proves about the ids it did not return.

    The walk asks for ascending ids, so each page is a contiguous slice of the id-ordered list as
    it was when that page was served: an id strictly between two neighbours on one page, below
    the first item of page 1, or above the last item of the last page did not exist then. An id
    between the last item of one page and the first of the next proves nothing: rows removed
    before the second request shift the list left and that id may have been skipped. A page out
    of ascending order, or a page bringing ids below ones already seen, means the upstream did
    not honour the order: then nothing is proven (`ordered` is False). A walk that could not ask
    for the order at all (`by_id` False, see `unsorted`) proves only what a single page holding
    the whole list proves.
    """

    by_id: bool = True  # False: the walk could not ask for an order (`unsorted`)
    ordered: bool = True
    gaps: list[tuple[int | None, int | None]] = field(default_factory=list)
    boundaries: list[tuple[int, int, int]] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)
    _top: int | None = None  # the highest id the walk has seen

    def unsorted(self) -> None:
        """Forget the pages so far: the walk starts again in the upstream's own order.

        That order is unknown (the spec shows none), so neighbours on a page say nothing about
        the ids between them, and a row whose place changes mid-walk can be skipped by every
        page: only a list served whole on one page (first and last at once) proves absence.
        """
        self.by_id, self.ordered = False, True
        self.gaps.clear()
        self.boundaries.clear()
        self._seen.clear()
        self._top = None

    def add(
        self, ids: list[int], *, offset: int, first: bool, last: bool, part_of_walk: bool = True
    ) -> None:
        if not self.by_id:
            if first and last:
                self.gaps.append((None, None))  # the whole list at one instant
            return
        if any(a >= b for a, b in itertools.pairwise(ids)):
            if part_of_walk:
                self.ordered = False
            return
        if part_of_walk:
            fresh = [i for i in ids if i not in self._seen]
            if fresh and self._top is not None and fresh[0] < self._top:
                self.ordered = False
                return
            if ids and self._top is not None and ids[0] > self._top:
                self.boundaries.append((self._top, ids[0], offset))
            self._seen.update(ids)
            if ids:
                self._top = ids[-1] if self._top is None else max(self._top, ids[-1])
        self.gaps.extend(itertools.pairwise(ids))
        if first and ids:
            self.gaps.append((None, ids[0]))
        elif first and last:
            self.gaps.append((None, None))  # an empty list; the store keeps its rows anyway
        if last and ids:
            self.gaps.append((ids[-1], None))

    def proves_absent(self, id_: int) -> bool:
        return any((lo is None or lo < id_) and (hi is None or id_ < hi) for lo, hi in self.gaps)

    def boundary_of(self, id_: int) -> int | None:
        """The offset of the page boundary `id_` fell into during the walk, if it did."""
        for lo, hi, offset in self.boundaries:
            if lo < id_ < hi:
                return offset
        return None

    def why_unproven(self) -> str:
        """Why rows the walk did not return may still exist (for the deferral warning)."""
        if not self.by_id:
            return (
                "the upstream refused sort_by[]: in its own order only a list served on one "
                "page proves rows gone"
            )
        if not self.ordered:
            return "listing not in the requested order"
        return "the listing shifted between pages: no page proves these rows gone"


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
            what = (
                "not a writable field"
                if err["type"] == "extra_forbidden"
                else str(err["msg"]).removeprefix("Value error, ")
            )
            problems.setdefault(loc[0], []).append(
                f"{'.'.join(loc[1:])}: {what}" if len(loc) > 1 else what
            )
    return dict(problems)


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

    async def _exchange(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        locale: str | None = None,
    ) -> tuple[Response, str]:
        """One request, answered (after the transport's retries); `path` has its user-given
        segments encoded already (`segment`)."""
        assert self._transport is not None, "use `async with ManagementClient(...)`"
        url = f"{self.settings.base_url}{path}"
        resp: Response = await self._transport.send(
            method, url, params=(lambda: params or {}), json=body, headers=self.headers(locale)
        )
        return resp, url

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        locale: str | None = None,
    ) -> Any:
        resp, url = await self._exchange(method, path, params=params, body=body, locale=locale)
        return self._answer(resp, url)

    def _answer(self, resp: Response, url: str) -> Any:
        """The JSON body of a success, or the error its status means."""
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

    async def press_release_page(
        self, locale: str, page_no: int, per_page: int, *, sort: bool = True
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """One page of the press release list, and its pagination_info: in ascending id order,
        or with `sort=False` in the upstream's own. `_SortRefused` when the upstream refuses
        the order (see `_refuses_sort`)."""
        params = {"page_no": str(page_no), "per_page": str(per_page)}
        if sort:
            params.update(PRESS_ORDER)
        resp, url = await self._exchange("GET", PRESS_PATH, params=params, locale=locale)
        if sort and _refuses_sort(resp, first_page=page_no == 1):
            raise _SortRefused(resp.status)
        doc = self._answer(resp, url)
        if not isinstance(doc, dict):
            raise BadResponseError("press release list that is not a JSON object", url=url)
        items, info = doc.get("press_releases"), doc.get("pagination_info")
        if not isinstance(items, list) or not isinstance(info, dict):
            raise BadResponseError("press release list without press_releases/pagination_info")
        return [i for i in items if isinstance(i, dict) and isinstance(i.get("id"), int)], info

    async def press_releases(
        self, locale: str, walk: Walk | None = None
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every page of the loyalty club's press releases in `locale`, following pagination_info;
        what the pages prove about absent ids is recorded in `walk`.

        The pages are asked for in ascending id order, unless this process already learned the
        upstream refuses it. A refusal (`_refuses_sort`) starts the walk again from page 1
        without the order, `walk` forgetting what the sorted pages proved (`Walk.unsorted`);
        the first page answered tells whether the order is honoured, remembered per base URL
        and logged once.
        """
        self.settings.require_user_token("the press release list")
        walk = walk if walk is not None else Walk()
        sort = sort_outcome(self.settings.base_url) is not False
        if not sort:
            walk.unsorted()
        refused: int | None = None
        page_no, per_page = 1, self.settings.per_page
        while True:
            try:
                items, info = await self.press_release_page(locale, page_no, per_page, sort=sort)
            except _SortRefused as refusal:
                sort, refused, page_no = False, refusal.status, 1
                walk.unsorted()
                continue
            if page_no == 1:
                _remember_sort(self.settings.base_url, sort, refused)
            last = bool(info.get("is_last_page")) or info.get("next_page") is None
            walk.add(
                [i["id"] for i in items],
                offset=(page_no - 1) * per_page,
                first=page_no == 1,
                last=last,
            )
            yield items
            if last or not items:
                return
            page_no = int(info["next_page"])

    async def confirm_absent(
        self, locale: str, walk: Walk, ids: Iterable[int]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Ask again about the ids a walk left unproven because they fell between two pages;
        yields the pages fetched (rows on them are current: the caller writes them).

        For each such boundary one small page is fetched that straddles it (a page size that
        does not divide the boundary's offset), so a row really gone shows up as a gap inside
        one page; a listing that shifted again just leaves the id unproven until the next run.
        """
        if not walk.by_id:
            return  # no boundaries: in an unknown order a straddling page proves nothing
        offsets = sorted({o for i in ids if (o := walk.boundary_of(i)) is not None})
        for offset in offsets:
            size = next(q for q in range(2, offset + 2) if offset % q)
            page_no = (offset - 1) // size + 1
            items, info = await self.press_release_page(locale, page_no, size)
            walk.add(
                [i["id"] for i in items],
                offset=(page_no - 1) * size,
                first=page_no == 1,
                last=bool(info.get("is_last_page")),
                part_of_walk=False,
            )
            yield items

    async def update_article(
        self, article_id: int, article: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """PUT the article's changes; what the spec forbids is refused before anything is sent
        (`InvalidParametersError` without a URL)."""
        problems = article_problems(article)
        if problems:
            raise InvalidParametersError(
                "Invalid parameters (refused before sending)", details=problems
            )
        params = {"dry_run": "true"} if dry_run else {}
        doc = await self._send(
            "PUT",
            f"/v1/content/management/articles/{segment(article_id)}",
            params=params,
            body={"article": article},
        )
        return dict(doc.get("article") or {})

    async def update_message(
        self, service: str, message_id: int, message: dict[str, Any], *, archived: str | None = None
    ) -> dict[str, Any]:
        """PUT the message's changes (a user token is required: spec, Authentication); what
        the spec forbids is refused before anything is sent (`InvalidParametersError` without a
        URL). `service` may hold any character: it is sent as one encoded path segment."""
        self.settings.require_user_token("the message update")
        problems = message_problems(message)
        if problems:
            raise InvalidParametersError(
                "Invalid parameters (refused before sending)", details=problems
            )
        params = {"archived": archived} if archived is not None else {}
        doc = await self._send(
            "PUT",
            f"/v1/messages/{segment(service)}/{segment(message_id)}",
            params=params,
            body={"message": message},
        )
        return dict(doc.get("message") or {})


async def mirror_press_releases(
    client: ManagementClient, store: Any, locales: list[str]
) -> dict[str, tuple[int, int]]:
    """List every press release in each locale into the mirror; returns locale -> (rows, removed).

    `store` is a `sync.store.press.PressReleases`. A row the listing did not return is removed
    only when some page proves it absent (see `Walk`); one the listing may have skipped while it
    shifted is kept, and so is everything when the upstream did not honour the requested order,
    or refused it and serves more than one page.
    """
    from sync.model.stamps import now_iso

    out: dict[str, tuple[int, int]] = {}
    for locale in locales:
        run = now_iso()
        rows = 0
        walk = Walk()
        async for page in client.press_releases(locale, walk):
            rows += store.write(locale, run, page)
        unseen = store.unseen(locale, run)
        if unseen and walk.ordered and walk.by_id:
            unproven = [i for i in unseen if not walk.proves_absent(i)]
            async for page in client.confirm_absent(locale, walk, unproven):
                store.write(locale, run, page)  # a row skipped by a shift, found again
            unseen = store.unseen(locale, run)
        proven = [i for i in unseen if walk.ordered and walk.proves_absent(i)]
        if len(proven) < len(unseen):
            log.warning(
                "press_releases_prune_deferred",
                locale=locale,
                kept=len(unseen) - len(proven),
                reason=walk.why_unproven(),
            )
        out[locale] = (rows, store.prune(locale, run, rows, proven))
    return out
