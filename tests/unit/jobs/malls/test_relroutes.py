"""`sync.jobs.malls.relroutes`: which refused include paths are taken from their own routes, and the
linkage written from them (a to-many route paged, a to-one route, an owner gone)."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from sync.channel.pages import Page
from sync.channel.profile import RouteProfile, UpstreamProfile
from sync.core.errors import NotFoundError
from sync.jobs.malls.relroutes import RelatedRoutes, routed
from sync.model import catalogue
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, page, res, stamp, table

ARTICLES = catalogue.TYPES["articles"]
JOBS = catalogue.TYPES["job_listings"]


def _route(key: str, **includes: str) -> RouteProfile:
    route = RouteProfile(key)
    route.includes = dict(includes)  # type: ignore[arg-type]
    return route


def test_only_refused_top_paths_with_a_route_are_routed() -> None:
    route = _route("/articles", malls="refused", tags="honoured", **{"images.tags": "refused"})
    rels, unrouted = routed(ARTICLES, route)
    assert [r.name for r in rels] == ["malls"] and unrouted == []
    rels, unrouted = routed(
        catalogue.TYPES["stores"], _route("/malls/{id}/stores", contacts="refused")
    )
    assert rels == [] and unrouted == ["contacts"]  # the spec lists no /stores/{id}/contacts
    # A mall's contacts come from the mall routes: neither routed nor reported.
    assert routed(catalogue.TYPES["malls"], _route("/malls", contacts="refused")) == ([], [])
    assert routed(ARTICLES, None) == ([], [])


class RoutesClient(FakeClient):
    """Serves the relationships' own routes from `docs` (path -> related resources, or a
    to-one target id; missing: 404)."""

    def __init__(self, profile: UpstreamProfile) -> None:
        super().__init__(size=2)
        self.profile = profile
        self.docs: dict[str, Any] = {}
        self.learned = 0

    def learn_profile(self) -> None:
        self.learned += 1

    def _body(self, path: str, number: str | None) -> Any:
        self.asked.append(("get", (path, number)))
        if path not in self.docs:
            raise NotFoundError("gone", url=path, status=404)
        return self.docs[path]

    async def related_one(self, path: str) -> Any:
        body = self._body(path, None)
        return None if body is None else {"id": str(body), "type": "stores"}

    async def related_page(self, path: str, number: int) -> Page:
        body = self._body(path, str(number))
        rows = body[(number - 1) * 2 : number * 2]
        return page(rows, number, max(1, -(-len(body) // 2)))


async def test_a_to_many_route_is_paged_into_the_owner_links(mirror: Mirror) -> None:
    table(mirror, "articles", [(1, stamp(1)), (2, stamp(1)), (3, stamp(1))])
    route = _route("/articles", malls="refused", products="refused")
    client = RoutesClient(UpstreamProfile(routes={"/articles": route}))
    client.docs = {
        "/articles/1/malls": [res(i, "malls", stamp(1)) for i in (10, 11, 12)],
        "/articles/1/products": [],
        "/articles/2/malls": [res(11, "malls", stamp(1))],
        "/articles/2/products": [res(7, "products", stamp(1))],
    }  # article 3: deleted upstream meanwhile (404), its links left alone
    with capture_logs():
        filled = await RelatedRoutes(client, mirror).fill([ARTICLES])
    assert filled == {"articles": 3}
    links = mirror.conn.execute(
        "SELECT articles_id, malls_id FROM articles_malls ORDER BY 1, 2"
    ).fetchall()
    assert [tuple(r) for r in links] == [(1, 10), (1, 11), (1, 12), (2, 11)]
    products = mirror.conn.execute(
        "SELECT articles_id, products_id FROM articles_products"
    ).fetchall()
    assert [tuple(r) for r in products] == [(2, 7)]
    assert route.linkage_from == {
        "malls": "/articles/{id}/malls",
        "products": "/articles/{id}/products",
    }
    assert client.learned == 1
    # Three rows at two a page: two pages for article 1's malls.
    assert [a for k, a in client.asked if a[0] == "/articles/1/malls"] == [
        ("/articles/1/malls", "1"),
        ("/articles/1/malls", "2"),
    ]


async def test_a_to_one_route_sets_the_column_and_unrouted_paths_are_reported(
    mirror: Mirror,
) -> None:
    mirror.conn.execute("CREATE TABLE job_listings (id INTEGER PRIMARY KEY, store_id INTEGER)")
    mirror.conn.executemany("INSERT INTO job_listings VALUES (?, ?)", [(1, None), (2, 5)])
    mirror.conn.commit()
    route = _route("/job-listings", store="refused")
    stores = _route("/malls/{id}/stores", social_feeds="refused")
    profile = UpstreamProfile(routes={"/job-listings": route, "/malls/{id}/stores": stores})
    client = RoutesClient(profile)
    client.docs = {"/job-listings/1/store": 9, "/job-listings/2/store": None}
    with capture_logs() as logs:
        filled = await RelatedRoutes(client, mirror).fill([JOBS, catalogue.TYPES["stores"]])
    assert filled == {"job_listings": 2}
    rows = mirror.conn.execute("SELECT id, store_id FROM job_listings ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [(1, 9), (2, None)]
    assert stores.linkage_from == {"social_feeds": "not mirrored"}
    assert [(e["event"], e["relationships"]) for e in logs] == [
        ("relroutes.not_mirrored", ["social_feeds"])
    ]
