"""`sync.channel.client`: the listings over a fake transport (`tests/support/transport.py`),
and the client's shape: it holds its session and transport, inherits nothing, and keeps a small
public surface (issue #41)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from urllib.parse import quote

import pytest

from sync.channel.client import ChannelClient
from sync.channel.pages import Page
from sync.channel.session import ChannelSession
from sync.channel.transport import Response
from sync.core.errors import NotFoundError
from sync.model.catalogue import TYPES
from sync.model.scopes import Scope
from tests.support.channel_fakes import BASE, channel_client
from tests.support.transport import FakeTransport, Sent, Upstream, answer

DEALS = Scope(TYPES["deals"])


def listing(ids: list[int], *, number: int = 1, last: int = 1) -> Response:
    """A page of deals with `ids` whose `links.last` names page `last`."""
    link = f"{BASE}/deals?{quote('page[number]')}={last}"
    return answer(
        200,
        {
            "data": [{"id": str(i), "type": "deals", "attributes": {}} for i in ids],
            "links": {"last": link},
            "meta": {},
        },
        headers={"ETag": f'"page-{number}"'},
    )


async def test_a_listing_page_arrives_after_the_login_decoded_into_a_page() -> None:
    upstream = Upstream({"/deals": lambda sent: listing([1, 2], last=3)})
    fake = FakeTransport(upstream)
    async with channel_client(transport=fake) as client:
        page = await client.list_page(DEALS, 1)
    assert isinstance(page, Page)
    assert [r["id"] for r in page.resources] == ["1", "2"]
    assert (page.number, page.last, page.api_version) == (1, 3, "v12.3.0")
    login, get = fake.sent
    assert login.path == "/accounts/login"
    # Every parameter explicit, as the spec advises.
    assert get.params["page[number]"] == "1" and get.params["sort"] == "id"
    assert get.params["page[size]"] == str(client.session.paging.asked)
    assert upstream.signed(get)


async def test_a_404_on_a_resource_raises_not_found() -> None:
    fake = FakeTransport(Upstream({}))
    async with channel_client(transport=fake) as client:
        with pytest.raises(NotFoundError):
            await client.resource(TYPES["deals"], 7)
    assert fake.paths() == ["/deals/7"]


async def test_fetch_ids_reads_every_page_of_an_upstream_that_serves_fewer_rows() -> None:
    """Asked in batches of the page size: 5 ids at 2 a page are three pages, one result."""

    def deals(sent: Sent) -> Response:
        ids = [int(i) for i in sent.params["filter[id]"].split(",")]
        size, number = int(sent.params["page[size]"]), int(sent.params["page[number]"])
        rows = ids[(number - 1) * size : number * size]
        return listing(rows, number=number, last=-(-len(ids) // size))

    fake = FakeTransport(Upstream({"/deals": deals}))
    async with channel_client(transport=fake, page_size=2) as client:
        page = await client.fetch_ids(DEALS, [1, 2, 3, 4, 5])
    assert [r["id"] for r in page.resources] == ["1", "2", "3", "4", "5"]
    asked = [(s.params["page[size]"], s.params["page[number]"]) for s in fake.sent[1:]]
    assert asked == [("2", "1"), ("2", "2"), ("2", "3")]
    assert {s.params["filter[id]"] for s in fake.sent[1:]} == {"1,2,3,4,5"}


async def test_fetch_ids_asks_no_page_after_every_id_asked_is_served() -> None:
    """#47: a full page holding the last id asked ends the walk (it asked the empty page after
    it: 100 ids cost two requests); a page short of an id still asks the next."""

    def deals(sent: Sent) -> Response:
        ids = [int(i) for i in sent.params["filter[id]"].split(",") if int(i) != 9]
        size, number = int(sent.params["page[size]"]), int(sent.params["page[number]"])
        rows = ids[(number - 1) * size : number * size]
        return listing(rows, number=number, last=-(-len(ids) // size))

    fake = FakeTransport(Upstream({"/deals": deals}))
    async with channel_client(transport=fake, page_size=2) as client:
        served = await client.fetch_ids(DEALS, [1, 2, 3, 4])
        assert [r["id"] for r in served.resources] == ["1", "2", "3", "4"]
        assert [s.params["page[number]"] for s in fake.sent[1:]] == ["1", "2"]
        fake.sent.clear()
        served = await client.fetch_ids(DEALS, [1, 2, 3, 9])  # 9 is not served
        assert [r["id"] for r in served.resources] == ["1", "2", "3"]
        assert [s.params["page[number]"] for s in fake.sent] == ["1", "2"]  # 2 is short


async def test_fetch_ids_with_no_ids_asks_nothing_and_more_than_a_batch_is_refused() -> None:
    fake = FakeTransport(Upstream({"/deals": lambda sent: listing([1])}))
    async with channel_client(transport=fake) as client:
        assert (await client.fetch_ids(DEALS, [])).resources == []
        with pytest.raises(ValueError, match="at most 100"):
            await client.fetch_ids(DEALS, list(range(101)))
    assert fake.sent == []


async def test_a_conditional_listing_sends_the_etag_of_a_whole_result_and_reads_a_304() -> None:
    def deals(sent: Sent) -> Response:
        if sent.headers.get("If-None-Match") == '"page-1"':
            return answer(304)
        return listing([1], number=1)

    fake = FakeTransport(Upstream({"/deals": deals}))
    async with channel_client(transport=fake) as client:
        first = await client.list_page(DEALS, 1, conditional=True)
        again = await client.list_page(DEALS, 1, conditional=True)
    assert not first.not_modified and [r["id"] for r in first.resources] == ["1"]
    assert again.not_modified and again.resources == []


def test_the_client_holds_the_transport_it_is_given_through_its_session() -> None:
    fake = FakeTransport(Upstream())
    client = channel_client(transport=fake)
    assert isinstance(client.session, ChannelSession)
    assert client.session.transport is fake
    assert client.webhooks.session is client.session and client.includes.client is client


def public_names() -> list[str]:
    return [n for n, _ in inspect.getmembers(ChannelClient) if not n.startswith("_")]


def test_the_client_inherits_nothing_and_keeps_a_small_public_surface() -> None:
    """Composition, not inheritance (#41): no base class but `object`, at most 25 public
    methods and properties, so the session's surface cannot creep back."""
    assert ChannelClient.__bases__ == (object,)
    assert len(public_names()) <= 25, public_names()


def test_no_public_method_of_the_client_only_forwards_to_its_session() -> None:
    """A method whose body is one `return self.session.x(...)` is a forward: its callers
    reach the session instead."""
    forwards = []
    for name in public_names():
        member = inspect.getattr_static(ChannelClient, name)
        func = member.fget if isinstance(member, property) else member
        if not inspect.isfunction(func):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        body = [s for s in tree.body[0].body if not isinstance(s, ast.Expr)]  # type: ignore[attr-defined]
        if len(body) == 1 and isinstance(body[0], ast.Return):
            value = body[0].value
            while isinstance(value, (ast.Await, ast.Call)):
                value = value.value if isinstance(value, ast.Await) else value.func
            if ast.unparse(value).startswith("self.session."):
                forwards.append(name)
    assert forwards == []
