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
run itself, every row the filter's bound around T holds, `sort=id` by page number (ids never
change place), each page checked (ids ascending across the run, every stamp in the bound); the
walk by key then goes on past the bound. A run page that fails the check (the upstream does not
honour `sort=id` or the bound) raises `TieOrder`: the poll reads the rest unsorted from T.

**What a date filter compares is learned** (`Compares`). The spec fixes the form of a served
stamp and of a filter value (milliseconds), not the precision the upstream compares at: a server
that keeps microseconds and serves milliseconds holds a row served `T` at `T.000123`, after
`lte=T` and after `gt=T`. The run's bound starts at what the listing is known to compare
(`served`: `gte=T&lte=T`, then `gt=T`) and widens on evidence, one step each, kept per listing
by the caller (`sync.channel.profile.RouteProfile.compares`):

- `finer` (stamps cut to the millisecond): `gte=T&lt=T+1ms`, then `gte=T+1ms`;
- `rounded` (stamps rounded to it): `gte=T-1ms&lt=T+1ms`, then `gte=T+1ms`, and each step of
  the walk by key starts a millisecond behind the newest stamp read.

The evidence: a run that lacks a row the page before showed at T, or a page after the run that
serves again what the walk held (the bound past the run did not exclude T's rows). Every row is
read once more at the wider bound, none skipped; past `rounded` the run is read unsorted.

**Progress** (`sync.channel.paging`, the progress rule): a page that brings nothing the walk
held ends it, and the walk by key never asks one position twice (each step moves past the
newest stamp read, each run is read once per bound), so a walk's requests stay within the pages
its rows fill plus a run's re-reads (two at most). A walk that ends on the rule returns what it
read with `PollResult.stalled` saying why; the poll reports it (health degraded, a metric).

**Unsorted** (`walk_unsorted`): every page of `filter[<stamp>][gte]=<since>` by page number in
id order, rows stamped before `since` left out (an upstream that ignores the filter too serves
them); the cursor is the newest stamp seen, or `since` when the listing changed while walked
(`links.last` moved): the next poll reads it again. A walk ended on the progress rule moves no
cursor (`PollResult.stalled`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal, Protocol

from sync.channel.pages import Page
from sync.channel.paging import Paging, next_number
from sync.core.errors import NoProgressError, UpstreamError
from sync.model.stamps import normalize_or_none, shift_ms

#: What a listing's date filter compares, learned (module docstring); "unknown" reads as
#: "served" until evidence says otherwise.
Comparison = Literal["unknown", "served", "finer", "rounded"]
#: The order evidence widens it in.
WIDER: dict[Comparison, Comparison | None] = {
    "unknown": "finer",
    "served": "finer",
    "finer": "rounded",
    "rounded": None,
}


class OutOfOrder(Exception):
    """A page of a walk by key came back out of stamp order: the upstream ignores `sort`."""


class TieOrder(Exception):
    """A page of a tie run read by id was not in id order or held another stamp."""

    def __init__(self, message: str, at: str, cursor: str | None) -> None:
        super().__init__(message)
        self.at = at  # the run's stamp: the unsorted walk goes on from it
        self.cursor = cursor  # the newest stamp the walk had read before the run


@dataclass
class Compares:
    """What one listing's date filter compares, as the walk learns it (module docstring);
    `learned` is told each widening with its evidence, to keep it (the route's profile)."""

    level: Comparison = "unknown"
    learned: Callable[[Comparison, str], None] | None = None

    def widen(self, evidence: str) -> bool:
        """Take the next wider reading; False when there is none."""
        wider = WIDER[self.level]
        if wider is None:
            return False
        self.level = wider
        if self.learned is not None:
            self.learned(wider, evidence)
        return True

    def run_bound(self, at: str) -> tuple[str, str, str]:
        """(gte, until op, until) holding every row served `at`."""
        if self.level == "finer":
            return at, "lt", shift_ms(at, 1)
        if self.level == "rounded":
            return shift_ms(at, -1), "lt", shift_ms(at, 1)
        return at, "lte", at

    def past(self, at: str) -> tuple[str, str]:
        """Where the walk by key goes on after the run at `at`: (anchor, op)."""
        if self.level in ("finer", "rounded"):
            return shift_ms(at, 1), "gte"
        return at, "gt"

    def behind(self, cursor: str) -> str:
        """The anchor of a step of the walk by key from the newest stamp read."""
        return shift_ms(cursor, -1) if self.level == "rounded" else cursor


@dataclass
class PollResult:
    """What one poll of one scope did."""

    requests: int = 0
    rows: int = 0  # served
    changed: int = 0  # of them, versions the mirror did not hold (`sync.jobs.incremental.poll`)
    cursor: str | None = None
    late: int = 0  # late arrivals among the rows (`sync.jobs.incremental.lateness`)
    ties: int = 0  # tie runs read whole by id
    #: Why the walk ended on the progress rule (None: it ended at the listing's end).
    stalled: str | None = None
    #: Distinct rows read (`rows` counts re-reads), set by the poll (`sync.jobs.incremental.poll`).
    distinct: int = 0


class Fetch(Protocol):
    """One page: `number` of the listing from `anchor` (`op`: gte or gt) in order `sort`,
    up to `until` (`until_op`: lte or lt) when given."""

    def __call__(
        self,
        anchor: str,
        number: int,
        sort: str = ...,
        *,
        op: str = ...,
        until: str | None = ...,
        until_op: str = ...,
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
    compares: Compares | None = None,
) -> PollResult:
    """Walk a listing sorted by `stamp_field` from `since` by key, tie runs by id; see the
    module docstring.

    The loop and its stop rule are the one every listing shares (`Paging.walk`, `Paging.more`
    with `page[size]=asked`): a page shorter than asked ends the walk only when it is shorter
    than the upstream serves."""
    compares = compares or Compares()
    result = PollResult()
    held: set[int] = set()  # the digests of the pages read by key (the progress rule)
    start: tuple[str, str] = (since, "gte")
    after: tuple[str, set[int]] | None = None  # the run just read: its stamp and ids
    while True:
        run: str | None = None
        shown: set[int] = set()

        def step(at: tuple[str, str], page: Page) -> tuple[str, str]:
            return (compares.behind(result.cursor) if result.cursor else at[0]), "gte"

        try:
            async for page in paging.walk(
                lambda at: fetch(at[0], 1, op=at[1]), start, step, asked=asked, held=held
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
                    shown = _ids(page)
                    break
        except NoProgressError as exc:
            if after is None or not compares.widen(
                f"{stamp_field} past {after[0]} served again rows stamped {after[0]}"
            ):
                result.stalled = str(exc)
                return result
            run, shown = after  # the bound past the run held its rows: read it wider
        else:
            if run is None:
                return result
            if (
                after is not None
                and run == after[0]
                and not compares.widen(f"{stamp_field} past {run} served again rows stamped {run}")
            ):
                # The run again at the bound it was read at, and no wider reading is left.
                result.stalled = f"the run of {stamp_field} = {run} came back past its bound"
                return result
        ids = await _read_run(fetch, run, stamp_field, paging, asked, on_page, result, compares)
        while not shown <= ids:
            # Rows the page showed at `run` are not within the bound: the filter compares
            # below the served precision (module docstring). Read the run again, wider.
            if not compares.widen(
                f"{stamp_field} in [{run}] lacked {len(shown - ids)} rows served at {run}"
            ):
                raise TieOrder(
                    f"a run of {stamp_field} = {run} lacked rows served at it at every bound",
                    run,
                    result.cursor,
                )
            ids |= await _read_run(
                fetch, run, stamp_field, paging, asked, on_page, result, compares
            )
        after = (run, shown)
        start = compares.past(run)


def _ids(page: Page) -> set[int]:
    return {i for r in page.resources if (i := _int_id(r.get("id"))) is not None}


async def _read_run(
    fetch: Fetch,
    at: str,
    stamp_field: str,
    paging: Paging,
    asked: int,
    on_page: Callable[[Page], None],
    result: PollResult,
    compares: Compares,
) -> set[int]:
    """Every row the bound around `at` holds (`Compares.run_bound`), by id (`sort=id`), each
    page checked; the ids read."""
    result.ties += 1
    low, until_op, until = compares.run_bound(at)
    high = shift_ms(at, 1) if compares.level == "rounded" else at
    last_id = -1
    read: set[int] = set()
    try:
        async for page in paging.walk(
            lambda n: fetch(low, n, "id", until=until, until_op=until_op),
            1,
            next_number,
            asked=asked,
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
            if not ordered or len(stamps) != n or any(not low <= s <= high for s in stamps):
                raise TieOrder(
                    f"a run of {stamp_field} = {at} read by id came back out of id order or "
                    f"with other stamps (page {page.number})",
                    low,
                    result.cursor,
                )
            last_id = ids[-1]
            read.update(ids)
    except UpstreamError as exc:
        # A run page served again (`NoProgressError`) or the bound refused (a 400 naming
        # `lt`): the run is read unsorted. Any other failure is the walk's.
        if not isinstance(exc, NoProgressError) and exc.status != 400:
            raise
        raise TieOrder(
            f"a run of {stamp_field} = {at} could not be read by id: {exc}", low, result.cursor
        ) from exc
    return read


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
    try:
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
    except NoProgressError as exc:
        # Read in id order, not by stamp: a cursor moved to the newest stamp read could pass
        # rows not reached. It stays; the rows read are written.
        result.stalled, result.cursor = str(exc), None
        return result
    if last != first_last and result.cursor is not None:
        result.cursor = since
    return result
