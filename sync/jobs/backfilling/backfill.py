"""The backfill: copy every configured type into the mirror, resumably, then repair what paging missed.

Shape of a run:
1. Malls first (the mall-scoped types are listed per mall), then every other type, each in its
   scopes (`catalogue.scope_key`: per mall, per deal visibility). Pages of all scopes flow through
   one bounded pool, so a thousand one-page mall scopes cost no more latency than one big type.
2. Every page is written in one transaction together with its checkpoint, so a run killed at any
   moment (even `kill -9`) resumes with the pages it had not committed: no gap, no duplicate.
3. Included resources of types the run lists itself (a deal's stores) come trimmed to
   `updated_at` and are not stored: their own pages bring them whole, and the links come from
   the linkage either way (`catalogue.sideload_trim`; ~40 % fewer bytes).
4. Page-number paging over a changing data set skips a row whenever an earlier row is deleted
   mid-way. After the pages, the *missed-row pass* lists ids and `updated_at` only (sparse
   fieldsets), fetches rows that are missing or stale by `filter[id]`, and removes local rows that
   the listing lacks once `filter[id]` confirms they are gone upstream, within the mass-delete
   guard (a listing that comes back empty where the mirror holds rows empties nothing). It runs
   only for a type where something may have been skipped (`sync.jobs.backfilling.missedrows`).
5. The incremental cursor of every scope, and of the deletions feed, is set to the moment the
   backfill *first* started (kept across resumes, `sync.jobs.backfilling.backfillrun`), so the daemon
   re-reads everything that changed while the backfill ran.
6. Beside the pages: the malls' hours (`sync.jobs.malls.hours`); after them, the linkage the pages
   could not carry and the management API's press releases (`sync.jobs.backfilling.backfilltail`).

`run_backfill` is the library entry of `ccsync backfill`; the daemon runs `Backfill` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence

from sync.channel.client import ChannelClient
from sync.channel.listing import Listing
from sync.channel.paging import PAST_END, next_number, reask
from sync.core import tally
from sync.core.config import Settings
from sync.core.errors import ForbiddenError, NotFoundError, UpstreamError
from sync.core.logs import get_logger
from sync.core.sections import ManagementSettings
from sync.jobs.backfilling import backfillrun, backfilltail
from sync.jobs.backfilling.backfillrun import BackfillReport, TypeReport
from sync.jobs.backfilling.missedrows import MissedRows
from sync.jobs.evidence import Evidence, confirm_mall_gone
from sync.jobs.fanout import bounded
from sync.jobs.incremental.tombstoneties import TombstoneTies
from sync.jobs.malls.hours import MallHours
from sync.jobs.oneshot import connected
from sync.jobs.progress import NullProgress, Progress, for_terminal
from sync.jobs.proving.reconcile import MassDeleteRefused, Reconciler, group_by_mall
from sync.jobs.typefaults import record_type
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.model.stamps import iso_ms
from sync.pipeline.batches import StagedPage
from sync.pipeline.pagepool import PagePool
from sync.pipeline.pageworker import bulk_gc
from sync.store import MirrorStore, PageCheckpoint
from sync.store.faults import database_errors
from sync.store.mirror import INCLUDED_SEEN

DELETIONS = catalogue.DELETIONS_FEED

#: Included rows the writer remembers while page workers run (`Mirror.included_memo`): each
#: worker leaves out the copies already written (`staging.Sent`); what still comes twice was
#: staged while its first copy was in flight, a few pages back, or in this process (the pages
#: it takes when the workers are backed up, `STAGE_HERE_AT`, leave out what this memo holds).
#: ~2 MB when full.
IN_FLIGHT_MEMO = 20_000

#: Pages in flight per page worker, beyond `concurrency` (see `Backfill.in_flight`).
PAGES_PER_WORKER = 24

#: Pages waiting at every worker from which the main process stages a page itself
#: (`PagePool.stage`): the worker is the busier process, and this evens the two out.
STAGE_HERE_AT = 12

#: Pages per transaction in a one-shot backfill (at most 2 s apart): fewer commits, each of which
#: rewrites the B-tree pages it touched; same resume guarantees.
GROUP_PAGES = 256


async def run_backfill(
    settings: Settings, *, restart: bool = False, quiet: bool = False
) -> BackfillReport:
    """Run one backfill with the given settings (library entry point of `ccsync backfill`).

    `[management]` configured without a user token is refused before anything is opened: the
    press release list the backfill mirrors needs one."""
    if settings.management is not None:
        settings.management.require_user_token("the press release list backfill mirrors")
    async with connected(settings) as (client, mirror):
        runner = Backfill(
            client, mirror, settings, progress=for_terminal(quiet), group_commit=GROUP_PAGES
        )
        return await runner.run(restart=restart)


async def mirror_management_press(
    mirror: MirrorStore,
    settings: ManagementSettings,
    report: BackfillReport,
    *,
    fail_fast: bool = True,
) -> None:
    """The press release job (`sync.jobs.backfilling.backfilltail`), its rows and removals in `report`."""
    t = report.types.setdefault("mgmt_press_releases", TypeReport())
    t.rows, t.removed = await backfilltail.press_releases(mirror, settings, fail_fast=fail_fast)


@contextlib.contextmanager
def _bulk_gc() -> Iterator[None]:
    """The cycle collector tuned for bulk parsing during the run (`staging.bulk_gc`), restored after."""
    thresholds = gc.get_threshold()
    bulk_gc()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class Backfill:
    """Copies the configured types from the upstream into the mirror; see the module docstring."""

    def __init__(
        self,
        client: ChannelClient,
        mirror: MirrorStore,
        settings: Settings,
        *,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.time,
        group_commit: int = 0,
    ) -> None:
        self.client = client
        self.mirror = mirror
        self.settings = settings
        self.progress: Progress = progress or NullProgress()
        self.clock = clock
        # Pages per SQLite transaction; only where nothing else shares the connection.
        self.group_commit = group_commit
        self.limit = settings.upstream.concurrency
        self.report = BackfillReport()
        # The delete guard holds here too: a glitch that lists no rows where the mirror holds
        # some (a prefilled mirror) must not empty it.
        self.reconciler = Reconciler(
            client, mirror, max_delete_share=settings.schedule.reconcile_max_delete_share
        )
        self.log = get_logger("sync.backfill")
        self.pages = PagePool(0)  # replaced by the run's pool
        # Pages between the start of their download and the end of their write: bounds the
        # memory of pages downloaded faster than they are staged (every type runs at once).
        # 24 a worker keep it busy while the main process commits a group (with eight, a
        # trace of a 200k backfill showed the worker waiting for input ~0.9 s of a 5.8 s page
        # phase; 16 gave 200k its gain, 24 gave 1M ~2 s more); the pages in flight cost under
        # 1 MB each, the same at 200k and at 1M resources (peak RSS at 1M: 134 MB with 16, 138
        # with 24).
        workers = settings.backfill.parse_workers
        self.in_flight = asyncio.Semaphore(self.limit + PAGES_PER_WORKER * max(1, workers))
        # Per listed type, the included types its pages carry trimmed (`catalogue.sideload_trim`).
        self.trim: dict[str, tuple[str, ...]] = {}
        self.missed = MissedRows(client, mirror)
        self.only: frozenset[str] | None = None  # the types this run copies (None: all)
        self.hours = MallHours(client, mirror, clock=clock)

    # -- the run -------------------------------------------------------------------------------

    async def run(
        self, *, restart: bool = False, only: Collection[str] | None = None
    ) -> BackfillReport:
        """Backfill every configured type (or the types named in `only`); resumes an
        interrupted run unless `restart`. Its `_sync_runs` record ends `ok`, `partial` (a type
        skipped), `failed` with this run's own error, or `stopped` (cancelled, Ctrl-C)."""
        t0 = time.monotonic()
        self.report = BackfillReport()  # a run reports only what it did itself
        self.only = None if only is None else frozenset(only)
        run_id = self.mirror.runs.start("backfill")
        status, error = "failed", None
        counted, token = tally.start()  # the requests on the `backfill.done` line
        try:
            started_at = await backfillrun.begin(
                self.client, self.mirror, self.settings, restart=restart, clock=self.clock
            )
            self.report.started_at = started_at
            prefilled = (self.mirror.meta.get(backfillrun.PREFILLED) or "").strip(",")
            self.mirror.indexes.defer(not prefilled)
            with self.progress, _bulk_gc():
                if self.group_commit:
                    self.mirror.group.start(self.group_commit)
                try:
                    async with PagePool(
                        self.settings.backfill.parse_workers, here_at=STAGE_HERE_AT
                    ) as self.pages:
                        memo = IN_FLIGHT_MEMO if self.pages.running else INCLUDED_SEEN
                        with self.mirror.included_memo(memo) as self.pages.memo:
                            await self._run_types(started_at)
                finally:
                    self.mirror.group.end()
                    self.pages = PagePool(0)
            self.mirror.indexes.defer(False)
            await backfilltail.fill_linkage(self.client, self.mirror, self.settings)
            # Copies stamped their tombstone's very moment (a mirror backfilled again).
            await TombstoneTies(Evidence(self.client, self.mirror)).settle(
                t.name for t in self.settings.upstream.mirrored_types()
            )
            status = "ok" if not any(t.error for t in self.report.types.values()) else "partial"
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "stopped"  # asked to stop: no error of its own
            raise
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            raise
        finally:
            tally.stop(token)
            self.report.seconds = time.monotonic() - t0
            errors = "; ".join(f"{n}: {t.error}" for n, t in self.report.types.items() if t.error)
            if status != "stopped":
                error = errors or error
            with contextlib.suppress(*database_errors()):  # else the next open says `interrupted`
                self.mirror.runs.finish(run_id, status=status, rows=self.report.rows, error=error)
        if status in ("ok", "partial"):
            backfillrun.finish(self.mirror)
        self.log.info(
            "backfill.done",
            rows=self.report.rows,
            requests=counted.requests,
            seconds=round(self.report.seconds, 2),
            status=status,
        )
        return self.report

    def cursor_start(self, started_at: str) -> str:
        """The cursors a finished scope gets (`backfillrun.cursor_start`)."""
        return backfillrun.cursor_start(self.client, self.mirror, started_at)

    async def _run_types(self, started_at: str) -> None:
        types = self.settings.upstream.mirrored_types()
        if self.only is not None:
            types = [t for t in types if t.name in self.only]
        mall_scoped = [t for t in types if t.level == "mall"]
        if (
            mall_scoped
            and not any(t.name == "malls" for t in types)
            # A daemon's backfill of the types never completed lists complete malls no more.
            and (self.only is None or "malls" not in self.mirror.backfills.completed_types())
        ):
            types = [catalogue.TYPES["malls"], *types]  # mall-scoped types need the mall ids
        listed = {t.name for t in types}
        self.trim = {t.name: catalogue.sideload_trim(t, listed) for t in types}
        top = [t for t in types if t.level == "top"]
        # Malls first: they are the scopes of everything listed per mall.
        if any(t.name == "malls" for t in top):
            await self._run_scopes(
                catalogue.TYPES["malls"], scopes_of(catalogue.TYPES["malls"], []), started_at
            )
        malls = list(self.mirror.table("malls").ids())
        others = [t for t in types if t.name != "malls"]
        # All types at once, and the malls' hours beside them (their small requests fill the
        # gaps between pages instead of queueing after the last one); the first failure
        # cancels the others (a bare gather would leave them writing to a mirror the caller
        # is about to close).
        jobs: list[Callable[[], Awaitable[None]]] = [
            functools.partial(self._run_scopes, t, scopes_of(t, malls), started_at) for t in others
        ]
        if malls:
            days = self.settings.schedule.hours_days
            jobs.append(functools.partial(self.hours.refresh_all, malls, days, limit=self.limit))
        await bounded(jobs, max(1, len(jobs)), lambda job: job())
        if self.settings.management is not None:
            await mirror_management_press(
                self.mirror,
                self.settings.management,
                self.report,
                fail_fast=self.client.fail_fast,
            )
        if self.mirror.cursors.get(DELETIONS, "") is None:
            self.mirror.cursors.set(DELETIONS, "", self.cursor_start(started_at))
        self.client.clock.flush()

    async def _run_scopes(self, rtype: ResourceType, scopes: list[Scope], started_at: str) -> None:
        report = self.report.types.setdefault(rtype.name, TypeReport())
        try:
            await bounded(scopes, self.limit, lambda s: self._pages(s, report, started_at))
            started_at = self.cursor_start(started_at)
            if await self.missed.needed(rtype, started_at):
                # Per (type, mall): the deal visibilities are one population of rows.
                await bounded(group_by_mall(scopes), self.limit, lambda g: self._repair(g, report))
            elif moved := await self.missed.moved(rtype, scopes, self._unchanged, self.limit):
                # Mall listings that changed under their walk: rows leave them unseen.
                self.log.info(
                    "backfill.mall_listings_changed",
                    type=rtype.name,
                    malls=len(moved),
                    hint="running the missed-row pass over them",
                )
                await bounded(group_by_mall(moved), self.limit, lambda g: self._repair(g, report))
            for s in scopes:
                self.mirror.backfills.finish(rtype.name, s.key, finished_at=iso_ms(self.clock()))
                if self.mirror.cursors.get(rtype.name, s.key) is None:
                    self.mirror.cursors.set(rtype.name, s.key, started_at)
            record_type(self.mirror, rtype.name, None, at=self.clock())
            self.mirror.backfills.type_completed(rtype.name, iso_ms(self.clock()))
            # Only a completed type is done: one stopped or failed keeps its bar where it is.
            self.progress.done(rtype.name)
        except MassDeleteRefused as exc:
            report.error = record_type(
                self.mirror,
                rtype.name,
                f"{exc} (check the upstream, then run `ccsync reconcile --force`)",
                at=self.clock(),
            )
        except ForbiddenError as exc:
            report.error = record_type(self.mirror, rtype.name, exc, at=self.clock())
            self.log.warning("backfill.type_forbidden", type=rtype.name, hint=exc.hint)
        except UpstreamError as exc:
            report.error = record_type(self.mirror, rtype.name, exc, at=self.clock())
            raise

    # -- pages ---------------------------------------------------------------------------------

    async def _pages(self, scope: Scope, report: TypeReport, started_at: str) -> None:
        """Fetch and write every page of one scope not yet committed by an earlier attempt.
        A mall route that answers 404 where a page was promised asks `GET /malls/{id}`: a mall
        deleted upstream since it was listed (404 there too) is a fact, not a failure (its
        memberships and hours go; the other scopes carry on); a mall still served fails the
        scope (`ListingMissingError`), nothing deleted."""
        try:
            await self._scope_pages(scope, report, started_at)
        except NotFoundError as exc:
            if scope.mall_id is None:
                raise
            await confirm_mall_gone(self.client, scope.mall_id, exc)
            self.log.info("backfill.mall_gone", type=scope.rtype.name, mall_id=scope.mall_id)
            self.mirror.malls.gone(int(scope.mall_id))
            self.mirror.backfills.finish(
                scope.rtype.name, scope.key, finished_at=iso_ms(self.clock())
            )

    async def _scope_pages(self, scope: Scope, report: TypeReport, started_at: str) -> None:
        name, key = scope.rtype.name, scope.key
        state = self.mirror.backfills.begin(
            name, key, page_size=self.settings.upstream.page_size, started_at=started_at
        )
        if state is None:
            return  # finished by an earlier attempt
        done: set[int] = set(state.pages_done)
        last = state.last or 0
        # The page with the highest number read, as (number, rows, links.last): the walk goes
        # on past `links.last` while that page is full (`Paging.more_after`).
        tail = (0, 0, 0)
        if 1 not in done or not last:
            async with self.in_flight:
                first = await self._fetch(scope, 1)
                last = first.last
                tail = (1, first.resources, first.last)
                self.missed.saw_scope(name, key, level=scope.rtype.level, last=last)
                self.progress.add_pages(name, last)
                if 1 not in done:
                    self._write(scope, first, report, last)
                del first
        else:
            self.missed.saw_scope(name, key, level=scope.rtype.level, last=last)
            self.progress.add_pages(name, last)
        if done:
            # Committed by the interrupted run: on the bar, and in the report apart from this
            # run's pages, so the summary adds up to what the progress lines said.
            self.progress.advance(name, 0, pages=len(done))
            report.resumed += len(done)

        async def one(number: int) -> None:
            nonlocal tail
            async with self.in_flight:
                try:
                    page = await self._fetch(scope, number)
                except UpstreamError as exc:
                    if exc.status not in PAST_END:
                        raise

                    async def still_promised() -> bool:
                        return (await self._fetch(scope, 1)).last >= number

                    again = await reask(lambda: self._fetch(scope, number), still_promised, exc)
                    if again is None:
                        # Promised by the first page's `links.last`, gone since: the listing
                        # shrank while walked (the missed-rows repair reads it again).
                        self.missed.shifted.add(name)
                        return
                    page = again
                if number > tail[0]:
                    tail = (number, page.resources, page.last)
                self._write(scope, page, report, last)

        todo = (n for n in range(2, last + 1) if n not in done)
        await bounded(todo, self.limit, one)
        if tail[0] and tail[0] < last:
            return  # resumed: the tail was read by an earlier attempt
        # Past `links.last`: an upstream whose `links.last` is short (or a listing that grew
        # while walked) has more behind a full last page. Asked one at a time.
        paging = self.client.paging
        if not tail[0] or not paging.more_after(*tail, self._asked()):
            return

        written = {tail[0]}  # a page asked again (`Paging.walk`'s recheck) is not written twice

        async def past(number: int) -> StagedPage:
            async with self.in_flight:
                page = await self._fetch(scope, number)
                if page.resources and number not in written:
                    written.add(number)
                    self.progress.add_pages(name, 1)
                    self._write(scope, page, report, last)
            return page

        # The one paging loop (`Paging.walk`); its stop rule asks for the page size live, as
        # `_asked` does.
        walk = paging.walk(
            past, tail[0] + 1, next_number, promised=tail[0] < tail[2], promised_by=tail[0]
        )
        async for page in walk:
            number = page.number
            if page.resources and number > last:
                # Rows past `links.last`: it named fewer pages than the listing holds (an empty
                # page there is the ordinary end of a listing whose last page was full).
                self.missed.shifted.add(name)
                self.missed.saw_scope(name, key, level=scope.rtype.level, last=number)
                self.log.warning(
                    "backfill.pages_past_last",
                    type=name,
                    scope=key or "top",
                    links_last=last,
                    page=number,
                    hint="the upstream's links.last named fewer pages than it holds; read on",
                )

    async def _unchanged(self, scope: Scope, number: int, tag: str) -> bool:
        """Whether page `number` of `scope` still answers 304 to its ETag (`MissedRows.moved`)."""
        trimmed = catalogue.trim_params(self.trim.get(scope.rtype.name, ()))
        resp = await self.client.list_response(
            Listing(scope, trimmed), number, headers={"If-None-Match": tag}
        )
        return resp.status == 304

    def _asked(self) -> int:
        return self.client.paging.size

    async def _fetch(self, scope: Scope, number: int) -> StagedPage:
        """Download one page here; parse and stage it in the page pool (another core)."""
        trim = self.trim.get(scope.rtype.name, ())
        resp = await self.client.list_response(Listing(scope, catalogue.trim_params(trim)), number)
        if scope.mall_id is not None:
            self.missed.saw_etag(scope.rtype.name, scope.key, number, resp.headers.get("ETag"))
        received = self.client.clock.local()
        mall = int(scope.mall_id) if scope.mall_id is not None else None
        page = await self.pages.stage(
            scope.rtype.name,
            resp.body,
            number=number,
            url=resp.url,
            status=resp.status,
            mall_id=mall,
            skip=trim,
        )
        self.client.clock.observe(page.newest(), received)
        return page

    def _write(self, scope: Scope, page: StagedPage, report: TypeReport, last: int) -> None:
        """Note what one page shows of its listing (`MissedRows.saw_page`), then write it."""
        self.missed.saw_page(
            scope.rtype.name,
            number=page.number,
            last=page.last,
            rows=page.resources,
            walked_last=last,
        )
        self.mirror.write_staged(
            page.batches,
            scripts=page.scripts,
            checkpoint=PageCheckpoint(
                scope.rtype.name, scope.key, page.number, max(page.number, page.last, last)
            ),
        )
        report.rows += page.resources
        report.pages += 1
        self.progress.advance(scope.rtype.name, page.resources)
        self.pages.written(page)  # its worker may now leave its included rows out

    async def _repair(self, scopes: Sequence[Scope], report: TypeReport) -> None:
        result = await self.missed.repair(self.reconciler, scopes)
        report.repaired += result.fetched
        report.removed += result.removed
        if not result.settled and scopes[0].mall_id is not None:
            report.unsettled.append(int(scopes[0].mall_id))
