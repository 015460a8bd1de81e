"""Fakes for the jobs' unit tests (`tests/unit/jobs`): an upstream client offering only what the
jobs call (served rows per scope, `filter[id]`, listings, the deletions feed), pages as the
client hands them on, and content tables made with raw SQL in a real mirror."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import SimpleNamespace
from typing import Any

from sync.channel.clock import UpstreamClock
from sync.channel.listing import Listing
from sync.channel.pages import Page
from sync.channel.paging import Paging, next_number
from sync.core.errors import NotFoundError
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope
from sync.store import Mirror

#: The fakes' "now" (2026-01-01T00:00:00Z), local and upstream alike.
NOW = 1_767_225_600.0


def stamp(second: int) -> str:
    """A stamp `second` seconds into 2026-01-01 (UTC), in the API's format."""
    minutes, seconds = divmod(second, 60)
    return f"2026-01-01T00:{minutes:02d}:{seconds:02d}.000Z"


def res(
    rid: int, type_: str, updated: str | None = None, created: str | None = None, **attrs: Any
) -> dict[str, Any]:
    """One resource as the upstream serves it."""
    stamps = {"updated_at": updated, "created_at": created or updated}
    return {"id": str(rid), "type": type_, "attributes": {**stamps, **attrs}}


def page(
    resources: Sequence[dict[str, Any]],
    number: int = 1,
    last: int = 1,
    *,
    included: Sequence[dict[str, Any]] = (),
    meta: dict[str, Any] | None = None,
) -> Page:
    return Page(list(resources), list(included), meta or {}, number, last, None)


def table(mirror: Mirror, name: str, rows: Sequence[tuple[int, str | None]]) -> None:
    """A content table `name` of (id, updated_at) rows, made with raw SQL."""
    mirror.conn.execute(
        f"CREATE TABLE IF NOT EXISTS [{name}] (id INTEGER PRIMARY KEY, updated_at TEXT)"
    )
    mirror.conn.executemany(f"INSERT INTO [{name}] (id, updated_at) VALUES (?, ?)", rows)
    mirror.conn.commit()


def ids(mirror: Mirror, name: str) -> list[int]:
    """The ids table `name` holds, ascending (raw SQL)."""
    return [r[0] for r in mirror.conn.execute(f"SELECT id FROM [{name}] ORDER BY id")]


class FakeClient:
    """The upstream seen through the client: `served[(type, scope key)]` the rows of each
    listing (by id), `malls` the malls `GET /malls/{id}` serves, `deletions` the feed's
    entries. Records every `filter[id]` and listing request in `asked`."""

    def __init__(self, *, size: int = 100, now: float = NOW) -> None:
        self.paging = Paging(size)
        self.clock = UpstreamClock(local=lambda: now)
        self.served: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.malls: set[int] = set()
        self.lost_listings: set[int] = set()  # malls whose listings answer 404
        self.deletions: list[dict[str, Any]] = []
        self.unlisted: set[int] = set()  # ids listings skip (paged by number); filter[id] serves
        self.asked: list[tuple[str, Any]] = []
        self.profile: Any = None  # no upstream profile learned
        self.settings: Any = SimpleNamespace(concurrency=2)  # requests at once

    def serve(self, scope: Scope, rows: Sequence[dict[str, Any]]) -> None:
        self.served[(scope.rtype.name, scope.key)] = sorted(rows, key=lambda r: int(r["id"]))

    def keep(self, store: Any) -> None:
        """What the client learns is kept nowhere here."""

    def _rows(self, scope: Scope) -> list[dict[str, Any]]:
        if scope.mall_id is not None and scope.mall_id in self.lost_listings:
            raise NotFoundError("listing gone", url=f"/malls/{scope.mall_id}", status=404)
        return self.served.get((scope.rtype.name, scope.key), [])

    async def fetch_ids(self, scope: Scope, wanted: Sequence[int | str]) -> Page:
        self.asked.append(("ids", (scope.key, sorted(int(i) for i in wanted))))
        keep = {int(i) for i in wanted}
        return page([r for r in self._rows(scope) if int(r["id"]) in keep])

    async def resource(self, rtype: ResourceType, rid: int | str) -> dict[str, Any]:
        self.asked.append(("resource", (rtype.name, int(rid))))
        if rtype.name == "malls" and int(rid) in self.malls:
            return res(int(rid), "malls")
        raise NotFoundError("no such resource", url=f"/{rtype.path}/{rid}", status=404)

    async def list_page(self, request: Scope | Listing, number: int, **_: Any) -> Page:
        listing = Listing.of(request)
        self.asked.append(("list", (listing.rtype.name, listing.scope.key, number)))
        skipped = {str(i) for i in self.unlisted}
        rows = [r for r in self._rows(listing.scope) if str(r["id"]) not in skipped]
        since = listing.params.get("filter[updated_at][gte]")
        if since is not None:
            rows = [r for r in rows if (r["attributes"].get("updated_at") or "") >= since]
        size = listing.size or self.paging.size
        last = max(1, -(-len(rows) // size))
        return page(rows[(number - 1) * size : number * size], number, last)

    def iter_pages(self, request: Scope | Listing, start: int = 1) -> AsyncIterator[Page]:
        return self.walk(lambda n: self.list_page(request, n), start)

    async def list_deletions(self, number: int, *, since: str | None = None, **_: Any) -> Page:
        self.asked.append(("deletions", (number, since)))
        rows = [
            e for e in self.deletions if since is None or e["attributes"]["created_at"] >= since
        ]
        size = self.paging.size
        return page(
            rows[(number - 1) * size : number * size], number, max(1, -(-len(rows) // size))
        )

    # Not served here (a job that asks fails the test): the fakes of the tests that need them
    # serve them; offered so this fake has the client's shape the jobs' Protocols name.

    async def list_members(
        self, rels: Sequence[str], number: int, *, size: int, etag: str | None = None
    ) -> tuple[Page, str | None]:
        raise AssertionError("`GET /malls` with members is not served by FakeClient")

    async def related_one(self, path: str) -> Any:
        raise AssertionError("relationship routes are not served by FakeClient")

    async def related_page(self, path: str, number: int) -> Page:
        raise AssertionError("relationship routes are not served by FakeClient")

    def learn_profile(self) -> None:
        """No profile is kept here."""

    def walk(
        self, fetch: Callable[[int], Awaitable[Page]], start: int = 1, *, promised: bool = True
    ) -> AsyncIterator[Page]:
        return self.paging.walk(fetch, start, next_number, promised=promised)


def deletion(eid: int, resource_type: str, rid: int | str, created: str | None) -> dict[str, Any]:
    """One entry of the deletions feed."""
    attrs = {"resource_type": resource_type, "resource_id": rid, "created_at": created}
    return {"id": str(eid), "type": "deletions", "attributes": attrs}
