"""The polls' walks of a listing from a stamp: by key in stamp order, tie runs by id, or unsorted.

**By key** (`walk_by_stamp`): each request asks for page 1 of `filter[<stamp>][gte]=<largest
stamp seen so far>` sorted by the stamp. A row updated while the poll runs moves to the end of
the order, where the poll still finds it; with page numbers it would shift every later row one
place and one of them would be skipped for good. Rows sharing the boundary stamp are read twice
(harmless: writes are idempotent upserts). A poll of k changes costs about ceil(k/100) + 1
requests per scope, whatever the size of the mirror.

**Tie runs** (more rows sharing one stamp T than a page holds, a bulk update): the order of
equal stamps is the upstream's to choose, and SQL `ORDER BY updated_at LIMIT/OFFSET` with no
tiebreaker may choose differently for every request, so paging through the run by number at
one anchor can hide rows. A full page whose rows all carry the anchor stamp therefore reads the
run itself, `filter[<stamp>][gte]=T&filter[<stamp>][lte]=T&sort=id` by page number (ids never
change place), each page checked (ids ascending across the run, every stamp T); the walk by key
then goes on from `filter[<stamp>][gt]=T`. A run page that fails the check (the upstream does
not honour `sort=id` or `lte`) raises `TieOrder`: the poll reads the rest unsorted from T.

**Unsorted** (`walk_unsorted`): every page of `filter[<stamp>][gte]=<since>` by page number in
id order, rows stamped before `since` left out (an upstream that ignores the filter too serves
them); the cursor is the newest stamp seen, or `since` when the listing changed while walked
(`links.last` moved): the next poll reads it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Protocol

from sync.channel.pages import Page
from sync.channel.paging import Paging, next_number
from sync.model.stamps import normalize_or_none


class OutOfOrder(Exception):
    """A page of a walk by key came back out of stamp order: the upstream ignores `sort`."""


class TieOrder(Exception):
    """A page of a tie run read by id was not in id order or held another stamp."""

    def __init__(self, message: str, at: str, cursor: str | None) -> None:
        super().__init__(message)
        self.at = at  # the run's stamp: the unsorted walk goes on from it
        self.cursor = cursor  # the newest stamp the walk had read before the run


@dataclass
class PollResult:
    """What one poll of one scope did."""

    requests: int = 0
    rows: int = 0  # served
    changed: int = 0  # of them, versions the mirror did not hold (`sync.jobs.poll`)
    cursor: str | None = None
    late: int = 0  # late arrivals among the rows (`sync.jobs.lateness`)
    ties: int = 0  # tie runs read whole by id


class Fetch(Protocol):
    """One page: `number` of the listing from `anchor` (`op`: gte or gt) in order `sort`,
    up to `until` (lte) when given."""

    def __call__(
        self,
        anchor: str,
        number: int,
        sort: str = ...,
        *,
        op: str = ...,
        until: str | None = ...,
    ) -> Awaitable[Page]: ...


def _stamps(page: Page, stamp_field: str) -> list[str]:
    # Normalised: the cursor is compared as text and sent back as a filter value; a row with an
    # unreadable stamp moves no cursor (its write logs the problem).
    return [
        s
        for r in page.resources
        if (s := normalize_or_none((r.get("attributes") or {}).get(stamp_field)))
    ]


async def walk_by_stamp(
    fetch: Fetch,
    since: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
) -> PollResult:
    """Walk a listing sorted by `stamp_field` from `since` by key, tie runs by id; see the
    module docstring.

    The loop and its stop rule are the one every listing shares (`Paging.walk`, `Paging.more`
    with `page[size]=asked`): a page shorter than asked ends the walk only when it is shorter
    than the upstream serves."""
    result = PollResult()
    start: tuple[str, str] = (since, "gte")
    while True:
        run: str | None = None

        def step(at: tuple[str, str], page: Page) -> tuple[str, str]:
            return (result.cursor or at[0]), "gte"

        async for page in paging.walk(
            lambda at: fetch(at[0], 1, op=at[1]), start, step, asked=asked
        ):
            result.requests += 1
            if not page.resources:
                continue
            stamps = _stamps(page, stamp_field)
            if any(a > b for a, b in pairwise(stamps)):
                # Written anyway (the rows are real); the key must not jump on this page.
                on_page(page)
                raise OutOfOrder(f"rows out of {stamp_field} order on page {page.number}")
            on_page(page)
            result.rows += len(page.resources)
            top = max(stamps) if stamps else None
            if top is not None and (result.cursor is None or top > result.cursor):
                result.cursor = top
            if top is None and paging.more(page, asked):
                # No readable stamp on a full page: the key cannot move on.
                raise OutOfOrder(f"no readable {stamp_field} on page {page.number}")
            anchor = stamps[0] if stamps else None
            if anchor is not None and top == anchor and paging.more(page, asked):
                run = anchor  # a whole page of one stamp: a tie run longer than a page
                break
        if run is None:
            return result
        await _read_run(fetch, run, stamp_field, paging, asked, on_page, result)
        start = (run, "gt")


async def _read_run(
    fetch: Fetch,
    at: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
    result: PollResult,
) -> None:
    """Every row stamped `at`, by id (`gte`=`lte`=`at`, `sort=id`), each page checked."""
    result.ties += 1
    last_id = -1
    async for page in paging.walk(
        lambda n: fetch(at, n, "id", until=at), 1, next_number, asked=asked
    ):
        result.requests += 1
        if not page.resources:
            continue
        on_page(page)  # the rows are real whatever their order
        result.rows += len(page.resources)
        ids = [i for r in page.resources if (i := _int_id(r.get("id"))) is not None]
        stamps = _stamps(page, stamp_field)
        n = len(page.resources)
        ordered = len(ids) == n and all(a < b for a, b in pairwise([last_id, *ids]))
        if not ordered or len(stamps) != n or any(s != at for s in stamps):
            raise TieOrder(
                f"a run of {stamp_field} = {at} read by id came back out of id order or with "
                f"other stamps (page {page.number})",
                at,
                result.cursor,
            )
        last_id = ids[-1]


def _int_id(raw: object) -> int | None:
    try:
        return int(str(raw))
    except ValueError:
        return None


async def walk_unsorted(
    fetch: Callable[[int], Awaitable[Page]],
    since: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
) -> PollResult:
    """Every page by number (id order), rows stamped before `since` left out; see the module
    docstring."""
    result = PollResult()
    first_last = last = None  # `links.last` of the first page and of the last one read
    async for page in paging.walk(fetch, 1, next_number, asked=asked):
        result.requests += 1
        first_last = page.last if first_last is None else first_last
        last = page.last
        rows = []
        for r in page.resources:
            stamp = normalize_or_none((r.get("attributes") or {}).get(stamp_field))
            if stamp is not None and stamp < since:
                continue
            rows.append(r)
            if stamp is not None and (result.cursor is None or stamp > result.cursor):
                result.cursor = stamp
        if rows:
            on_page(replace(page, resources=rows))
            result.rows += len(rows)
    if last != first_last and result.cursor is not None:
        result.cursor = since
    return result
