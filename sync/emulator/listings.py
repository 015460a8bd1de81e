"""The JSON:API read routes: collections, single resources, related routes, a mall's listings.

A page is assembled from bytes: the selected rows' encodings (`render`) joined with the
`included` resources, the paging links and `meta.scripts`, under a weak ETag of the body. Under
the page cache (`PageCache`) a listing's body is reused while the data set is unchanged; under
`Hard.shifting_listings` a row of an earlier page may leave before the page is served
(`shifting`); under `Faults.stale_rate` a page may come from a lagging replica (older copies);
under `Hard.unstable_ties` rows sharing the sorted-by stamp come in a new order every request.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from sync.emulator import shifting
from sync.emulator.app import EmulatorApp
from sync.emulator.commits import shuffle_ties
from sync.emulator.hours import HoursRoutes
from sync.emulator.query import Query
from sync.emulator.records import Rec
from sync.emulator.render import encode_plain, encode_resource, related, variant
from sync.emulator.responses import error, etagged
from sync.emulator.spec import (
    BY_PATH,
    MALL_CHANNEL,
    MODELLED,
    RELATED_ROUTES,
    SIDELOADED,
    SORTED,
    SORTED_IN_MALL,
    TARGET,
    TOP_CHANNEL,
)


class Listings:
    """Handlers of the spec's read routes over `emu`."""

    def __init__(self, emu: EmulatorApp, hours: HoursRoutes) -> None:
        self.emu = emu
        self.hours = hours

    def _included(self, recs: list[Rec], q: Query) -> list[bytes]:
        """The `included` members: the resources every include path reaches (`images`,
        `images.tags`), once each; an included resource carries the linkage of the paths that
        continue through it (an image reached by `images.tags` serves its tags' linkage)."""
        data, base = self.emu.data, self.emu.base
        seen: set[tuple[str, int]] = set()
        out: list[bytes] = []
        variants: dict[str, tuple[tuple[str, ...] | None, str, tuple[str, ...]]] = {}
        nested: dict[str, list[str]] = {}
        paths = [p.split(".") for p in q.include]
        for path in paths:
            if len(path) > 1:
                owner = TARGET.get(path[0], path[0])
                nested.setdefault(owner, []).append(path[1])
        for rec in recs:
            for path in paths:
                level = [rec]
                for name in path:
                    level = [o for r in level for o in related(data, r, name)]
                    for other in level:
                        key = (other.type, other.id)
                        if key in seen:
                            continue
                        seen.add(key)
                        v = variants.get(other.type)
                        if v is None:  # once per included type and page, not per resource
                            fields = q.fields_for(other.type)
                            inc = tuple(dict.fromkeys(nested.get(other.type, ())))
                            if self.emu.all_linkage() and other.type in SIDELOADED:
                                every = sorted(MODELLED.get(other.type, ()))
                                inc = tuple(dict.fromkeys((*inc, *every)))
                            v = variants[other.type] = (fields, variant(inc, fields), inc)
                        out.append(
                            encode_resource(data, base, other, v[2], v[0], v[1], data.stamp_forms)
                        )
        return out

    def _document(
        self, request: web.Request, recs: list[Rec], q: Query, *, total: int, type_name: str
    ) -> web.Response:
        emu = self.emu
        data = emu.data
        fields = q.fields_for(type_name)
        top = tuple(dict.fromkeys(p.split(".")[0] for p in q.include))
        key = variant(top, fields)
        if not top and fields is None and not data.stamp_forms:
            blobs = encode_plain(data, emu.base, recs)
        else:
            blobs = [
                encode_resource(data, emu.base, r, top, fields, key, data.stamp_forms) for r in recs
            ]
        parts = [b'{"data":[', b",".join(blobs), b"]"]
        if q.include:
            parts += [b',"included":[', b",".join(self._included(recs, q)), b"]"]
        parts += [
            b',"links":',
            orjson.dumps(emu.page_links(request, total, q.size, q.number)),
            b',"meta":{"scripts":',
            emu.scripts_of(type_name),
            b"}}",
        ]
        return etagged(request, b"".join(parts))

    async def collection(self, request: web.Request) -> web.StreamResponse:
        type_name = BY_PATH.get(request.match_info["collection"])
        if type_name is None or type_name not in TOP_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        self.emu.auth(request, (TOP_CHANNEL[type_name],))
        defaults = {"visibility": "Public"} if type_name == "deals" else None
        return self._list(request, type_name, None, defaults)

    def _list(
        self,
        request: web.Request,
        type_name: str,
        mall: int | None,
        defaults: dict[str, str] | None,
    ) -> web.Response:
        emu = self.emu
        emu.data.due()  # late feed entries and dropped rows whose time came (`late`)
        key = generation = None
        sortable = type_name in (SORTED if mall is None else SORTED_IN_MALL)
        if emu.hard.shifting_listings:
            shifting.before_page(
                emu.data,
                emu.selector,
                type_name,
                mall,
                emu.parse(type_name, request, defaults, sortable=sortable),
            )
        # Ties under a stamp sort ordered anew for every request: no cached page.
        shuffled = emu.hard.unstable_ties and request.query.get("sort", "id").lstrip("-") != "id"
        if emu.pages.enabled and not shuffled:
            key, generation = (request.path, emu.public_query(request)), emu.data.generation
            body = emu.pages.get(key, generation)
            if body is not None:
                return etagged(request, body)
        q = emu.parse(type_name, request, defaults, sortable=sortable)
        ids = emu.selector.select(type_name, mall, q)
        emu.past_end(len(ids), q)
        start = (q.number - 1) * q.size
        recs = emu.data.by_type[type_name]
        if shuffled and q.sort and q.sort[0][0] != "id":
            attr = q.sort[0][0]
            window = shuffle_ties(
                ids, start, q.size, lambda i: recs[i].get(attr), emu.data.hard_rng
            )
        else:
            window = ids[start : start + q.size]
        page = [recs[i] for i in window]
        stale = emu.faults.roll(emu.faults.stale_rate, "stale_page")
        if stale:  # a lagging replica answers: older copies, never cached
            page = [emu.data.older(r) for r in page]
        resp = self._document(request, page, q, total=len(ids), type_name=type_name)
        if key is not None and generation is not None and resp.status == 200 and not stale:
            assert isinstance(resp.body, bytes)
            emu.pages.put(key, resp.body, generation)
        return resp

    async def single(self, request: web.Request) -> web.StreamResponse:
        emu = self.emu
        type_name = BY_PATH.get(request.match_info["collection"])
        if type_name is None or type_name not in TOP_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        emu.auth(request, (TOP_CHANNEL[type_name],))
        rec = emu.rec(type_name, request.match_info["id"])
        q = emu.parse(type_name, request)
        top = tuple(dict.fromkeys(p.split(".")[0] for p in q.include))
        body = b'{"data":' + encode_resource(
            emu.data, emu.base, rec, top, q.fields_for(type_name), forms=emu.data.stamp_forms
        )
        if q.include:
            body += b',"included":[' + b",".join(self._included([rec], q)) + b"]"
        body += b',"links":' + orjson.dumps({"self": emu.url(request)})
        body += b',"meta":{"scripts":' + emu.scripts_of(type_name) + b"}}"
        return etagged(request, body)

    async def related_route(self, request: web.Request) -> web.StreamResponse:
        emu = self.emu
        type_name = BY_PATH.get(request.match_info["collection"])
        name = request.match_info["rel"].replace("-", "_")
        if type_name == "malls":
            return await self.mall_route(request)
        routes = RELATED_ROUTES.get(type_name or "", {})
        if type_name is None or name not in routes:
            return error(404, "Not Found", f"no route {request.path}")
        emu.auth(request, (routes[name],))
        rec = emu.rec(type_name, request.match_info["id"])
        others = related(emu.data, rec, name)
        target = TARGET.get(name, name)
        q = emu.parse(target, request)
        if name in ("mall", "store"):
            body = b'{"data":' + (
                encode_resource(emu.data, emu.base, others[0], (), None, forms=emu.data.stamp_forms)
                if others
                else b"null"
            )
            body += b',"meta":{"scripts":' + emu.scripts_of(target) + b"}}"
            return etagged(request, body)
        emu.past_end(len(others), q)
        start = (q.number - 1) * q.size
        return self._document(
            request, others[start : start + q.size], q, total=len(others), type_name=target
        )

    async def mall_route(self, request: web.Request) -> web.StreamResponse:
        sub = request.match_info["rel"]
        if sub == "hours":
            return await self.hours.hours(request)
        if sub == "current-hours":
            return await self.hours.current_hours(request)
        type_name = BY_PATH.get(sub)
        if type_name is None or type_name not in MALL_CHANNEL:
            return error(404, "Not Found", f"no route {request.path}")
        self.emu.auth(request, MALL_CHANNEL[type_name])
        mall = self.emu.rec("malls", request.match_info["id"])
        defaults = {"visibility": "Public"} if type_name == "deals" else None
        return self._list(request, type_name, mall.id, defaults)
