"""Fetch by id: the one path the queue worker, polls, the reconcile and the verify share.

A resource is fetched by `filter[id]` (up to 100 ids a request) in every scope of its listing
group (one mall, or each deal visibility), with its includes, and written with the mirror's
guarded page write. A deletion is applied only when `filter[id]` confirms the resource is gone
in every scope: a notice or a listing that lacks a row is a hint, never proof.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sync.channel.client import MAX_IDS, ChannelClient
from sync.core.errors import ListingMissingError, NotFoundError
from sync.model import catalogue
from sync.model.catalogue import ResourceType
from sync.model.scopes import Scope, scopes_of
from sync.pipeline.encoding import parse_id
from sync.pipeline.staging import stage_resources
from sync.store import Mirror


async def confirm_mall_gone(client: ChannelClient, mall_id: int | str, exc: NotFoundError) -> None:
    """A listing of mall `mall_id` answered 404 (`exc`) on a page it was expected to serve:
    that is evidence about the listing, not the mall. `GET /malls/{id}` decides: its 404
    returns (the mall is gone; the caller removes it); a mall it serves raises
    `ListingMissingError` naming the listing, a failure of that scope, never a deletion."""
    try:
        await client.resource(catalogue.TYPES["malls"], mall_id)
    except NotFoundError:
        return
    raise ListingMissingError(
        f"a listing of mall {mall_id} answered 404 while GET /malls/{mall_id} serves the mall",
        url=exc.url,
        status=404,
        hint="the upstream lost that listing; nothing was deleted, it is asked again next run",
    ) from exc


class Fetcher:
    """Fetches resources by id and writes or deletes them in the mirror."""

    def __init__(self, client: ChannelClient, mirror: Mirror) -> None:
        self.client = client
        self.mirror = mirror

    async def fetch_and_write(self, scopes: Sequence[Scope], ids: Sequence[int]) -> int:
        """Fetch `ids` by `filter[id]` in every scope of the group; write what comes back."""
        return len(await self.fetch_found(scopes, ids))

    async def fetch_found(self, scopes: Sequence[Scope], ids: Sequence[int]) -> set[int]:
        """`fetch_and_write`, returning the ids the upstream served."""
        found: set[int] = set()
        for scope in scopes:
            page = await self.client.fetch_ids(scope, ids)
            if page.resources:
                self.mirror.write_staged(
                    stage_resources(scope.rtype, page.resources, page.included, scope.mall_id),
                    scripts=page.meta.get("scripts"),
                )
                found.update(parse_id(r["id"]) for r in page.resources)
            else:  # none of them served, but the type's scripts may have changed
                self.mirror.write_scripts(scope.rtype, page.meta.get("scripts"))
        return found

    async def fetch_in_malls(
        self, rtype: ResourceType, groups: Mapping[int | None, Sequence[int]]
    ) -> tuple[int, set[int]]:
        """Fetch ids by `filter[id]` grouped by where to ask (a mall, or None: `rtype`'s
        top-level scopes) and write what comes back; the requests made and the ids served.
        A mall's listing that answers 404 asks `GET /malls/{id}`: a mall gone is skipped (its
        members go with it, by the feed or the proof); one still served raises."""
        asked = 0
        found: set[int] = set()
        for mall, ids in groups.items():
            scopes = scopes_of(rtype, [mall] if mall is not None else [])
            for start in range(0, len(ids), MAX_IDS):
                asked += len(scopes)
                try:
                    found |= await self.fetch_found(scopes, ids[start : start + MAX_IDS])
                except NotFoundError as exc:
                    if mall is None:
                        raise
                    await confirm_mall_gone(self.client, mall, exc)
                    break
        return asked, found

    async def confirm_and_delete(self, scopes: Sequence[Scope], ids: Sequence[int]) -> int:
        """Delete those of `ids` that `filter[id]` confirms are gone; rewrite the others.
        A confirmation is an inference, not the feed's dated evidence: no tombstone, so a row
        created again under the same id, or served again, is written whatever its stamp."""
        gone = await self.confirm_gone(scopes, ids)
        if not gone:
            return 0
        return self.mirror.table(scopes[0].rtype.name).delete(gone)

    async def confirm_gone(self, scopes: Sequence[Scope], ids: Sequence[int]) -> list[int]:
        """Those of `ids` that `filter[id]` does not find in any scope; the others rewritten."""
        still_there: set[int] = set()
        for scope in scopes:
            try:
                page = await self.client.fetch_ids(scope, ids)
            except NotFoundError as exc:
                if scope.mall_id is None:
                    raise
                await confirm_mall_gone(self.client, scope.mall_id, exc)
                continue  # the mall itself is gone: so are its rows
            if page.resources:
                self.mirror.write_staged(
                    stage_resources(scope.rtype, page.resources, page.included, scope.mall_id)
                )
                still_there.update(parse_id(r["id"]) for r in page.resources)
        return [i for i in ids if i not in still_there]

    async def leave_malls(self, rtype: ResourceType, ids: Sequence[int]) -> int:
        """Ask `filter[id]` for mall-scoped `ids` in each mall the mirror lists them in; a mall
        that no longer serves one loses the membership (the row stays: only evidence that no
        mall lists it deletes it). Returns the memberships removed."""
        left = 0
        for mall, mall_ids in self.mirror.table(rtype.name).by_mall(ids).items():
            left += await self.leave_mall(rtype, mall, mall_ids)
        return left

    async def leave_mall(self, rtype: ResourceType, mall: int, ids: Sequence[int]) -> int:
        """`leave_malls` in one mall: those of `ids` it no longer serves lose the membership
        (100 ids a request). Returns the memberships removed."""
        left = 0
        for start in range(0, len(ids), MAX_IDS):
            gone = await self.confirm_gone(scopes_of(rtype, [mall]), ids[start : start + MAX_IDS])
            left += self.mirror.table(rtype.name).remove_memberships(mall, gone)
        return left
