"""The press release list: its one paging loop, the id order it asks for, and its mirroring.

The management API does not page as JSON:API does: a page is asked by `page_no` and `per_page`
and answers a `pagination_info` object (spec: Pagination info) whose `next_page` (null on the
last) and `is_last_page` say what follows, with no `links`. So it does not walk through the
Channel Content API's `Paging.walk`, whose stop rule reads `links.last` and the served page size;
it has exactly one loop of its own, `PressReleaseList.press_releases`, which stops where
`pagination_info` says the list ends (or at an empty page). `confirm_absent` asks single pages
and never loops over the list.

The list is asked for in ascending id order, a guess (the spec leaves the values of `sort_by[]`
open): an upstream refusing it is walked in its own order instead, and the outcome is remembered
for the process (`sort_outcome`). What the pages prove about rows the list did not return is
`sync.management.walk.Walk`'s; `mirror_press_releases` writes the list into the mirror.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from sync.channel.transport import Response
from sync.core.errors import BadResponseError
from sync.core.logs import get_logger
from sync.management.session import ManagementSession
from sync.management.walk import Walk

# The spec leaves the values of sort_by[] / sort_directions[] open; ascending id is the order
# the emulator documents and the one a walk can check (see `Walk`). Sent as a probe: see
# `PressReleaseList.press_releases` for the fallback.
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


class PressReleaseList(ManagementSession):
    """GET /v1/content/press_releases, page by page (a user token is required)."""

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
            walk.add_page(items, page_no, per_page, last=last)
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
            walk.add_page(
                items, page_no, size, last=bool(info.get("is_last_page")), part_of_walk=False
            )
            yield items


async def mirror_press_releases(
    client: PressReleaseList, store: Any, locales: list[str]
) -> dict[str, tuple[int, int]]:
    """List every press release in each locale into the mirror; returns locale -> (rows, removed).

    `store` is a `sync.store.press.PressReleases`; `client` any client with the press release
    list (`sync.management.client.ManagementClient`). A row the listing did not return is removed
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
