"""`sync.channel.session`: login, re-login on 401, status -> exception, over a fake transport
(`tests/support/transport.py`): no HTTP server, the session's layers run for real."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

import pytest

from sync.channel.session import RELOGINS, ChannelSession
from sync.channel.signing import sign
from sync.channel.transport import Response
from sync.core.errors import AuthError, ForbiddenError, NotFoundError, UpstreamError
from tests.support.channel_fakes import EMAIL, NOW, PASSWORD, channel_client
from tests.support.transport import FakeTransport, Sent, Upstream, answer


def ok(sent: Sent) -> Response:
    return answer(200, {"data": []})


async def test_the_first_request_logs_in_and_goes_signed_with_the_token() -> None:
    upstream = Upstream({"/deals": ok})
    fake = FakeTransport(upstream)
    async with channel_client(transport=fake, clock=lambda: NOW) as client:
        await client.session.request("GET", "/deals", {"sort": "id"})
    login, get = fake.sent
    assert (login.method, login.path) == ("POST", "/accounts/login")
    assert login.json["data"]["attributes"] == {"email": EMAIL, "password": PASSWORD}
    assert login.headers["Content-Type"] == "application/vnd.api+json"
    assert (get.method, get.path, get.params["sort"]) == ("GET", "/deals", "id")
    assert get.params["auth_id"] == EMAIL and get.params["auth_timestamp"] == str(int(NOW))
    assert get.params["auth_token"] == sign("token-1", int(NOW))
    assert get.headers["Accept"] == "application/vnd.api+json"
    assert fake.closed  # the session closes the transport it was given, as httpx's client does


async def test_a_401_logs_in_again_once_and_sends_the_request_again() -> None:
    upstream = Upstream({"/deals": ok})
    fake = FakeTransport(upstream)
    async with channel_client(transport=fake) as client:
        await client.session.request("GET", "/deals")
        upstream.logout()  # a logout elsewhere ends the session
        resp = await client.session.request("GET", "/deals")
    assert resp.status == 200
    assert upstream.logins == 2 and client.session.stats.relogins == 1
    assert [(s.method, s.path) for s in fake.sent] == [
        ("POST", "/accounts/login"),
        ("GET", "/deals"),
        ("GET", "/deals"),  # 401
        ("POST", "/accounts/login"),
        ("GET", "/deals"),
    ]
    assert fake.stats.statuses == {201: 2, 200: 2, 401: 1}


async def test_a_401_after_every_fresh_login_is_an_auth_error_not_a_loop() -> None:
    upstream = Upstream({"/deals": lambda sent: answer(401, {"errors": [{"detail": "gone"}]})})
    fake = FakeTransport(upstream)
    async with channel_client(transport=fake) as client:
        with pytest.raises(AuthError, match=f"refused a fresh session \\(401\\) {RELOGINS} times"):
            await client.session.request("GET", "/deals")
    assert upstream.logins == 1 + RELOGINS  # the first login and the re-logins, no more


async def test_logouts_that_come_again_while_it_logs_in_are_cured_by_logging_in_again() -> None:
    """Another system logs the account out right after each of our next two logins (legal: the
    spec bounds neither when nor how often): the request logs in until a session holds."""
    upstream = Upstream({"/deals": ok})
    fake = FakeTransport(upstream)

    def login_then_logout_elsewhere(sent: Sent) -> Response:
        got = upstream(sent)
        if sent.path == "/accounts/login" and upstream.logins in (2, 3):
            upstream.logout()
        return got

    fake.handler = login_then_logout_elsewhere
    async with channel_client(transport=fake) as client:
        await client.session.request("GET", "/deals")
        upstream.logout()
        resp = await client.session.request("GET", "/deals")
    assert resp.status == 200
    assert upstream.logins == 4 and client.session.stats.relogins == 3


class LoginWhileWaiting(FakeTransport):
    """The first GET waits for a slot while another request logs in again (a new token) and
    the account is then logged out elsewhere: that GET is signed with the newer, dead token."""

    def __init__(self, upstream: Upstream) -> None:
        super().__init__(upstream)
        self.upstream = upstream
        self.session: ChannelSession | None = None

    async def send(self, method: str, url: str, **kwargs: Any) -> Response:
        if method == "GET" and self.session is not None:
            session, self.session = self.session, None
            await session.login()  # another request's re-login, between start and signing
            self.upstream.logout()
        return await super().send(method, url, **kwargs)


async def test_a_401_on_a_token_newer_than_the_request_logs_in_again_at_once() -> None:
    """The login a 401 needs is judged by the token the refused attempt carried, not by the
    one the request started with: skipping it would send the dead token again."""
    upstream = Upstream({"/deals": ok})
    fake = LoginWhileWaiting(upstream)
    async with channel_client(transport=fake) as client:
        await client.session.login()
        fake.session = client.session
        resp = await client.session.request("GET", "/deals")
    assert resp.status == 200
    assert [(s.method, s.path) for s in fake.sent] == [
        ("POST", "/accounts/login"),
        ("POST", "/accounts/login"),  # the other request's, while this one waited
        ("GET", "/deals"),  # signed with token-2, logged out: 401
        ("POST", "/accounts/login"),  # not skipped: no login came after token-2
        ("GET", "/deals"),
    ]


async def test_a_refused_login_names_the_settings_to_check() -> None:
    fake = FakeTransport(lambda sent: answer(422, {"errors": [{"detail": "bad credentials"}]}))
    async with channel_client(transport=fake) as client:
        with pytest.raises(AuthError, match="login refused") as info:
            await client.session.request("GET", "/deals")
    assert "[upstream] email" in str(info.value.hint)
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("status", "error"),
    [(404, NotFoundError), (403, ForbiddenError), (422, UpstreamError), (400, UpstreamError)],
)
async def test_an_error_status_raises_the_exception_it_means(
    status: int, error: type[UpstreamError]
) -> None:
    detail = {"errors": [{"detail": "the detail"}]}
    fake = FakeTransport(Upstream({"/deals/7": lambda sent: answer(status, detail)}))
    async with channel_client(transport=fake) as client:
        with pytest.raises(error, match="the detail") as info:
            await client.session.request("GET", "/deals/7")
    assert info.value.status == status and info.value.url == "http://upstream.test/deals/7"


async def test_every_answer_teaches_the_api_version_and_the_upstreams_clock() -> None:
    upstream = Upstream({"/deals": ok})
    upstream.headers = {"X-API-Version": "v13.1.0", "Date": formatdate(NOW + 120, usegmt=True)}
    async with channel_client(transport=FakeTransport(upstream), clock=lambda: NOW) as client:
        await client.session.request("GET", "/deals")
        assert client.session.api_version == "v13.1.0"
        assert client.session.clock_offset == pytest.approx(120)


async def test_a_400_naming_page_size_asks_again_smaller_and_keeps_the_smaller_size() -> None:
    def deals(sent: Sent) -> Response:
        if int(sent.params["page[size]"]) > 20:
            return answer(400, {"errors": [{"detail": "page[size] is too large"}]})
        return answer(200, {"data": [], "links": {}})

    fake = FakeTransport(Upstream({"/deals": deals}))
    async with channel_client(transport=fake, page_size=100) as client:
        resp = await client.session.get_listing("/deals", client.session.page_query(1))
        assert resp.status == 200
        # Down to the spec's default first, then halved.
        asked = [s.params["page[size]"] for s in fake.sent if s.path == "/deals"]
        assert asked == ["100", "25", "12"]
        assert client.session.page_query(2)["page[size]"] == "12"


async def test_without_a_transport_given_none_is_used_outside_the_context() -> None:
    client = channel_client()
    with pytest.raises(RuntimeError, match="async with"):
        client.session.transport  # noqa: B018
    assert client.session.unreachable is None
