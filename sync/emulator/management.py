"""The emulator's management API v1: press release list, article update, message update.

Served beside the Channel Content API routes, as `../shared/spec/management-api-v1.md`
describes them: context headers checked, a user token (`Authorization: Bearer`) required where
the spec labels the operation "user token", pagination info computed, localized fields resolved
for `X-Locale`, 404 and 422 with the spec's bodies (the update bodies checked by
`management_rules`), and `dry_run=true` persisting nothing. The seed documents are
`management_data`'s. Choices where the spec is silent are in the README's management section.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import orjson
from aiohttp import web

from sync.emulator.management_data import (
    LOCALES,
    PRODUCT,
    article,
    message,
    press_release,
    template,
)
from sync.emulator.management_rules import (
    ARTICLE_FIELDS,
    article_field_error,
    message_errors,
    publication_status,
)
from sync.model.articles import ARTICLE_READ_ONLY
from sync.model.stamps import iso_ms

CLUB = "demo-club"
NOT_FOUND = {"error": "Record not found"}
# The spec leaves sort_by[] values open: these are the emulator's (README, emulator section);
# without sort_by[] the list is newest first.
PRESS_SORTABLE = ("id", "published_at", "title", "slug", "headline")
DEFAULT_PRESS_ORDER = [("published_at", True), ("id", True)]


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def _sort_key(item: dict[str, Any], key: str, locale: str) -> Any:
    value = item[key]
    return value.get(locale) or "" if isinstance(value, dict) else value


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
        self.press: dict[int, dict[str, Any]] = {}
        # hard cases of the press release list, off by default: see `_shift_press`; a server
        # serving its default order whatever sort_by[] asks; a server refusing sort_by[] and
        # sort_directions[] with a 400 (the spec does not show their values), counted
        self.shift_at_page: int | None = None
        self.ignore_sort = False
        self.refuse_sort = False
        self.sort_refusals = 0
        for i in range(1, press_releases + 1):
            self.press[i] = press_release(i, rng)
        self.articles: dict[int, dict[str, Any]] = {i: article(i) for i in range(1, 31)}
        self.messages: dict[tuple[str, int], dict[str, Any]] = {
            ("sms", i): message(i) for i in range(1, 11)
        }
        self._templates = 10  # the highest template id handed out

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
        new = press_release(new_id, random.Random(new_id))
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
                base = {"template": template(self._templates)}
            merged = {**base, **channel, "template": base["template"]}
            if "sender" in channel and isinstance(base.get("sender"), dict):
                merged["sender"] = {**base["sender"], **channel["sender"]}
            out.append(merged)
        return out

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/content/press_releases", self.press_releases)
        app.router.add_put("/v1/content/management/articles/{id}", self.update_article)
        app.router.add_put("/v1/messages/{service}/{id}", self.update_message)
