"""The emulator's management API v1: press release list, article update, message update.

Served beside the Channel Content API routes, as `../shared/spec/management-api-v1.md`
describes them: context headers checked, a user token (`Authorization: Bearer`) required where
the spec labels the operation "user token", pagination info computed, localized fields resolved
for `X-Locale`, 404 and 422 with the spec's bodies (the message update's fields type-checked),
and `dry_run=true` persisting nothing. Choices where the spec is silent are in the README's
management section.
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web

from sync.emulator.dataset import iso_ms
from sync.model.stamps import is_date_time

LOCALES = ("en", "de")
PRODUCT = "loyalty"
CLUB = "demo-club"
ARTICLE_READ_ONLY = frozenset(
    {
        "id",
        "customer_id",
        "sorting_priority",
        "image",
        "url",
        "publication_status",
        "created_at",
        "updated_at",
        "archived_at",
    }
)
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
ARTICLE_FIELDS = frozenset(ARTICLE_WRITABLE) | ARTICLE_READ_ONLY
STATUSES = ("draft", "published", "unpublished")
MESSAGE_WRITABLE = frozenset(
    {"name", "shorten_urls", "track_in_shortener", "marketing", "campaign_id", "channels"}
)
CHANNEL_WRITABLE = frozenset({"type", "include_footer", "sender"})
SENDER_WRITABLE = frozenset({"from_email", "from_name"})
NOT_FOUND = {"error": "Record not found"}
# The spec leaves sort_by[] values open: these are the emulator's (README, emulator section);
# without sort_by[] the list is newest first.
PRESS_SORTABLE = ("id", "published_at", "title", "slug", "headline")
DEFAULT_PRESS_ORDER = [("published_at", True), ("id", True)]


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


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


def _sort_key(item: dict[str, Any], key: str, locale: str) -> Any:
    value = item[key]
    return value.get(locale) or "" if isinstance(value, dict) else value


def _file(url: str, stamp: str, identifier: str | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {
        "url": url,
        "mime_type": "image/jpeg",
        "created_at": stamp,
        "updated_at": stamp,
        "image_details": {"width": 1200, "height": 800},
    }
    if identifier:
        f["identifier"] = identifier
    return f


class Management:
    """Management data and handlers; `token` is the user token it accepts (Authorization:
    Bearer), `client_token` the client token (X-Client-Authorization)."""

    def __init__(
        self,
        seed: int,
        clock: Any,
        *,
        press_releases: int = 120,
        token: str = "mgmt-demo-token",
        client_token: str = "mgmt-demo-client-token",
    ) -> None:
        self.clock = clock
        self.token = token
        self.client_token = client_token
        rng = random.Random(seed * 7 + 1)
        stamp = iso_ms(1_735_689_600.0)
        self.press: dict[int, dict[str, Any]] = {}
        # hard cases of the press release list, off by default: see `_shift_press`; a server
        # serving its default order whatever sort_by[] asks; a server refusing sort_by[] and
        # sort_directions[] with a 400 (the spec does not show their values), counted
        self.shift_at_page: int | None = None
        self.ignore_sort = False
        self.refuse_sort = False
        self.sort_refusals = 0
        for i in range(1, press_releases + 1):
            self.press[i] = self._press_release(i, rng)
        self.articles: dict[int, dict[str, Any]] = {}
        for i in range(1, 31):
            self.articles[i] = {
                "id": i,
                "customer_id": 1,
                "locales": list(LOCALES),
                "products": [PRODUCT],
                "status": "published",
                "visible_since": None,
                "visible_until": None,
                "visible_in_list": True,
                "topic_relevant_until": None,
                "sorting_priority": 0,
                "title": {loc: f"Article {i} ({loc})" for loc in LOCALES},
                "slug": {loc: f"article-{i}" for loc in LOCALES},
                "teaser": {loc: None for loc in LOCALES},
                "body": {loc: f"Body {i}" for loc in LOCALES},
                "headline": {loc: None for loc in LOCALES},
                "published_at": stamp,
                "image": _file(f"https://files.example/a/{i}.jpg", stamp),
                "url": f"/articles/{i}",
                "prototype_id": None,
                "publication_status": "published",
                "external_master": "",
                "us_legacy_data": None,
                "tag_ids": [1],
                "category_ids": [2],
                "created_at": stamp,
                "updated_at": stamp,
                "archived_at": None,
            }
        self.messages: dict[tuple[str, int], dict[str, Any]] = {}
        self._templates = 10  # the highest template id handed out
        for i in range(1, 11):
            self.messages[("sms", i)] = {
                "id": i,
                "name": f"Message {i}",
                "shorten_urls": False,
                "track_in_shortener": False,
                "marketing": None,
                "campaign_id": 1,
                "channels": [
                    {
                        "type": "sms",
                        "include_footer": True,
                        "sender": {"from_email": "club@example.com", "from_name": "Club"},
                        "template": {
                            "id": i,
                            "type": "plain",
                            "content": {
                                "language": "en",
                                "body": "Hi {{first_name}}",
                                "footer": "Stop: reply STOP",
                            },
                            "translations": [],
                            "wrapper_id": 1,
                            "merge_properties": ["first_name"],
                            "thumbnail_url": "https://files.example/t.png",
                        },
                    }
                ],
                "created_at": stamp,
                "updated_at": stamp,
                "archived_at": None,
                "updated_by": str(uuid.UUID(int=i)),
                "sending_status_type": "draft",
                "sending": {
                    "id": i,
                    "created_at": stamp,
                    "updated_at": stamp,
                    "scheduled_at": stamp,
                    "scheduled_by": str(uuid.UUID(int=i)),
                    "reporting_id": i,
                    "transmitted_at": stamp,
                    "status": "draft",
                    "status_type": "draft",
                    "audience_id": 1,
                    "recipients_count": 0,
                    "dispatches_count": 0,
                    "members_count": 0,
                    "scheduled_with": {"type": "immediate"},
                    "channels_preference": "sms",
                },
            }

    def _press_release(self, i: int, rng: random.Random) -> dict[str, Any]:
        stamp = iso_ms(1_735_689_600.0)
        return {
            "id": i,
            "title": {loc: f"{loc.upper()} press release {i}" for loc in LOCALES},
            "slug": {loc: f"{loc}-press-{i}" for loc in LOCALES},
            "teaser": {loc: f"{loc} teaser {rng.randint(1, 999)}" for loc in LOCALES},
            "body": {loc: f"{loc} body of {i}" for loc in LOCALES},
            "headline": {loc: f"{loc} headline {i}" for loc in LOCALES},
            "published_at": iso_ms(1_735_689_600.0 + i * 3600),
            "attachments": [_file(f"https://files.example/pr/{i}/a.pdf", stamp, "attachment")],
            "image": _file(f"https://files.example/pr/{i}/image.jpg", stamp),
            "url": f"/press/{i}",
            "category_ids": sorted({rng.randint(1, 8) for _ in range(rng.randint(0, 3))}),
        }

    # -- checks --------------------------------------------------------------------------------

    def _credentials(self, request: web.Request, *, user: bool) -> web.Response | None:
        """A 401 unless the request carries a credential the operation accepts: the user token
        where the spec says "Authorization: user token", else either token."""
        bearer = request.headers.get("Authorization", "") == f"Bearer {self.token}"
        client = request.headers.get("X-Client-Authorization", "") == self.client_token
        if user and not bearer:
            return _json(
                401,
                {
                    "error": "Unauthorized: this operation requires a user token "
                    "(Authorization: Bearer)"
                },
            )
        if not (bearer or client):
            return _json(401, {"error": "Unauthorized"})
        return None

    def _context(self, request: web.Request, *, club: bool, user: bool) -> web.Response | None:
        if (refused := self._credentials(request, user=user)) is not None:
            return refused
        missing = [h for h in ("X-User-Agent", "X-Product-Name") if not request.headers.get(h)]
        if club and not request.headers.get("X-Loyalty-Club-Slug"):
            missing.append("X-Loyalty-Club-Slug")
        if missing:
            return _json(
                422,
                {"error": "Invalid parameters", "details": {h: ["is required"] for h in missing}},
            )
        if request.headers.get("X-Product-Name") != PRODUCT:
            return _json(
                422, {"error": "Invalid parameters", "details": {"X-Product-Name": ["is unknown"]}}
            )
        if club and request.headers.get("X-Loyalty-Club-Slug") != CLUB:
            return _json(404, NOT_FOUND)
        return None

    # -- press releases ------------------------------------------------------------------------

    async def press_releases(self, request: web.Request) -> web.StreamResponse:
        if (bad := self._context(request, club=True, user=True)) is not None:
            return bad
        locale = request.headers.get("X-Locale", LOCALES[0])
        if locale not in LOCALES:
            return _json(
                422,
                {
                    "error": "Invalid parameters",
                    "details": {"X-Locale": [f"must be one of {', '.join(LOCALES)}"]},
                },
            )
        try:
            per_page = int(request.query.get("per_page", "25"))
            page_no = int(request.query.get("page_no", "1"))
        except ValueError:
            return _json(
                422,
                {"error": "Invalid parameters", "details": {"per_page": ["must be an integer"]}},
            )
        if not 1 <= per_page <= 100 or page_no < 1:
            return _json(
                422,
                {
                    "error": "Invalid parameters",
                    "details": {"per_page": ["must be 1..100"], "page_no": [">= 1"]},
                },
            )
        if self.refuse_sort and {"sort_by[]", "sort_directions[]"} & set(request.query):
            self.sort_refusals += 1
            return _json(
                400,
                {"error": "unpermitted parameters: sort_by, sort_directions"},
            )
        order = self._press_order(request)
        if isinstance(order, web.Response):
            return order
        cats = {int(c) for c in request.query.getall("category_ids[]", []) if c.isdigit()}
        if self.ignore_sort:
            order = []
        if self.shift_at_page is not None and page_no == self.shift_at_page:
            self._shift_press(self._press_list(order, locale, cats))
        items = self._press_list(order, locale, cats)
        total = len(items)
        pages = max(1, -(-total // per_page))
        chunk = items[(page_no - 1) * per_page : page_no * per_page]
        out = [
            {**p, **{k: p[k][locale] for k in ("title", "slug", "teaser", "body", "headline")}}
            for p in chunk
        ]
        info = {
            "count": len(out),
            "total_count": total,
            "per_page": per_page,
            "total_pages": pages,
            "current_page": page_no,
            "next_page": page_no + 1 if page_no < pages else None,
            "prev_page": page_no - 1 if 1 < page_no <= pages + 1 else None,
            "is_first_page": page_no == 1,
            "is_last_page": page_no == pages,
            "is_out_of_range": page_no > pages,
            "offset": (page_no - 1) * per_page,
        }
        return _json(200, {"press_releases": out, "pagination_info": info})

    def _press_order(self, request: web.Request) -> list[tuple[str, bool]] | web.Response:
        """The (field, descending) pairs of `sort_by[]` / `sort_directions[]`, or a 422."""
        fields = request.query.getall("sort_by[]", [])
        directions = request.query.getall("sort_directions[]", [])
        details: dict[str, list[str]] = {}
        unknown = [f for f in fields if f not in PRESS_SORTABLE]
        if unknown:
            details["sort_by"] = [f"{', '.join(unknown)}: not one of {', '.join(PRESS_SORTABLE)}"]
        if any(d not in ("asc", "desc") for d in directions):
            details["sort_directions"] = ["must be asc or desc"]
        elif len(directions) > len(fields):
            details["sort_directions"] = ["at most one entry per sort_by entry"]
        if details:
            return _json(422, {"error": "Invalid parameters", "details": details})
        return [(f, i < len(directions) and directions[i] == "desc") for i, f in enumerate(fields)]

    def _press_list(
        self, order: list[tuple[str, bool]], locale: str, cats: set[int]
    ) -> list[dict[str, Any]]:
        items = [p for p in self.press.values() if not cats or cats & set(p["category_ids"])]
        for key, descending in reversed(order or DEFAULT_PRESS_ORDER):
            items.sort(key=functools.partial(_sort_key, key=key, locale=locale), reverse=descending)
        return items

    def _shift_press(self, items: list[dict[str, Any]]) -> None:
        """The hard case `shift_at_page` (one-shot): just before that page is served, the first
        press release of the list (in the order asked for) is removed and a new, backdated one
        (a fresh, higher id; the oldest published_at) added, so the total stays the same while
        the rows of the later pages move one place left."""
        self.shift_at_page = None
        if not items:
            return
        del self.press[items[0]["id"]]
        new_id = max(self.press, default=items[0]["id"]) + 1
        new = self._press_release(new_id, random.Random(new_id))
        new["published_at"] = min(p["published_at"] for p in items)
        self.press[new_id] = new

    # -- article update ------------------------------------------------------------------------

    async def update_article(self, request: web.Request) -> web.StreamResponse:
        if (bad := self._context(request, club=False, user=False)) is not None:
            return bad
        if request.content_type != "application/json":
            return _json(
                422,
                {
                    "error": "Invalid parameters",
                    "details": {"Content-Type": ["must be application/json"]},
                },
            )
        raw = request.match_info["id"]
        if not raw.isdigit() or int(raw) < 1:
            return _json(
                422, {"error": "Invalid parameters", "details": {"id": ["must be an integer >= 1"]}}
            )
        article = self.articles.get(int(raw))
        if article is None:
            return _json(404, NOT_FOUND)
        try:
            body = orjson.loads(await request.read())
            changes = body["article"]
            if not isinstance(changes, dict):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _json(
                422, {"error": "Invalid parameters", "details": {"article": ["is required"]}}
            )
        details: dict[str, list[str]] = {}
        for key, value in changes.items():
            if key not in ARTICLE_FIELDS:
                details[key] = ["is not a field of Article"]
            elif key in ARTICLE_READ_ONLY:
                details[key] = ["is read-only"]
            elif (problem := article_field_error(key, value)) is not None:
                details[key] = [problem]
        if details:
            return _json(422, {"error": "Invalid parameters", "details": details})
        updated = {**article, **changes, "updated_at": iso_ms(self.clock())}
        updated["publication_status"] = publication_status(updated, self.clock())
        if request.query.get("dry_run") != "true":
            self.articles[article["id"]] = updated
        return _json(200, {"article": updated})

    # -- message update ------------------------------------------------------------------------

    async def update_message(self, request: web.Request) -> web.StreamResponse:
        if (bad := self._context(request, club=True, user=True)) is not None:
            return bad
        raw = request.match_info["id"]
        message = (
            self.messages.get((request.match_info["service"], int(raw))) if raw.isdigit() else None
        )
        if message is None:
            return _json(404, NOT_FOUND)
        try:
            changes = orjson.loads(await request.read())["message"]
            if not isinstance(changes, dict):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _json(
                422, {"error": "Invalid parameters", "details": {"message": ["is required"]}}
            )
        details = message_errors(changes)
        if details:
            return _json(422, {"error": "Invalid parameters", "details": details})
        updated = {**message, **changes, "updated_at": iso_ms(self.clock())}
        channels = changes.get("channels")
        if isinstance(channels, list):
            updated["channels"] = self._keep_templates(message["channels"], channels)
        archived = request.query.get("archived")
        if archived is not None:
            updated["archived_at"] = iso_ms(self.clock()) if archived == "true" else None
        self.messages[(request.match_info["service"], int(raw))] = updated
        return _json(200, {"message": updated})

    def _keep_templates(
        self, old: list[dict[str, Any]], new: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The request's channels, each over the old channel it replaces (the one of the same
        type, else the one at the same place): the template is kept (a response field the
        request cannot set), and so is any field the request leaves out (the spec marks none
        required; `sender` and its fields merged one level down). A channel replacing none gets
        a new empty template."""
        by_type = {c.get("type"): c for c in old}
        out = []
        for i, channel in enumerate(new):
            base = by_type.get(channel.get("type")) or (old[i] if i < len(old) else None)
            if base is None:
                self._templates += 1
                base = {
                    "template": {
                        "id": self._templates,
                        "type": "plain",
                        "content": {"language": LOCALES[0], "body": "", "footer": ""},
                        "translations": [],
                        "wrapper_id": 1,
                        "merge_properties": [],
                        "thumbnail_url": "https://files.example/t.png",
                    }
                }
            merged = {**base, **channel, "template": base["template"]}
            if "sender" in channel and isinstance(base.get("sender"), dict):
                merged["sender"] = {**base["sender"], **channel["sender"]}
            out.append(merged)
        return out

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/content/press_releases", self.press_releases)
        app.router.add_put("/v1/content/management/articles/{id}", self.update_article)
        app.router.add_put("/v1/messages/{service}/{id}", self.update_message)
