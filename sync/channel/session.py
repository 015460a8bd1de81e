"""`ChannelSession`: the signed, authenticated request to the Channel Content API, in layers.

This module owns the session (the accounts and their login tokens, the clock offset, the page
size) and the path one request takes through it, apart from any endpoint. It holds its transport
(`Sender`, `sync.channel.protocols`): the retrying `Transport` over an aiohttp session unless
one is given, as httpx's `Client(transport=...)`, so a test answers requests with a function. As httpx's `send` ->
`_send_handling_auth` -> `_send_handling_redirects` -> `_send_single_request`, each layer is one
method with one job:

    request               status -> exception (403, 404, other 4xx)
    _send_routing         the account that reads the route; the next one after a 403
    _send_handling_auth   log in first; log in again on a 401 (`RELOGINS` at most)
    _send_handling_skew   sign again when a 401's `Date` taught another clock offset
    _send_signed          sign the attempt (`sync.channel.signing`) and hand it to the transport
    Sender.send           one attempt (`_attempt`) repeated under the `RetryPolicy`; concurrency,
                          the request budget (`sync.channel.transport`); `observe` sees
                          every answer (the `Date` offset, the API version)

401 means the session ended (someone logged the account out elsewhere, which ends every session
sharing the token): the client logs in again and sends the request again. Another system may log
the account out again between that login and the request sent again (the spec bounds neither how
often nor when), so a request may log in `RELOGINS` times; a 401 after that many fresh logins is
an `AuthError`. Concurrent 401s share one login: a 401 logs in again unless a login came after
the token the refused attempt was signed with (`Signature.generation`), never judged by when the
request started (its attempts are signed as they are sent, maybe with a newer token).

The paged GET sits on the session too, because the page size it asks is session state: the one
page-number loop (`walk`) with the one stop rule (`Paging.more`), and `get_listing`, which asks a
page again smaller when the upstream refuses `page[size]`. The client holds it
(`ChannelClient.session`, `sync.channel.client`: the listings, the include fallback, the
subscriptions); what it learns (page size, accounts' routes) outlives the run in the store the
client hands it (`keep`). No base class: the client composes it, it does not inherit it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp
import orjson

from sync.channel.accounts import Account, Accounts, route_of
from sync.channel.pages import Page, decode, to_page
from sync.channel.paging import Paging
from sync.channel.protocols import MetaStore, Sender
from sync.channel.signing import Credentials
from sync.channel.transport import (
    Response,
    RetryPolicy,
    Stats,
    Transport,
    TransportSettings,
    scrub,
)
from sync.core import tally
from sync.core.config import UpstreamSettings
from sync.core.errors import (
    AuthError,
    BadResponseError,
    ForbiddenError,
    LoginRefusedError,
    NotFoundError,
    UpstreamError,
)
from sync.core.logs import get_logger

ACCEPT = {"Accept": "application/vnd.api+json"}
#: Headers of a request with a JSON:API body: JSON:API requires its media type for bodies too
#: (a strict server answers 415 to `application/json`).
JSONAPI_BODY = {**ACCEPT, "Content-Type": "application/vnd.api+json"}
#: Times a 401 after a fresh login is signed again because its `Date` taught another offset.
RESKEWS = 2
#: Logins one request may make after 401s (logouts elsewhere may come again while it logs in).
RELOGINS = 3


def error_detail(body: bytes) -> str:
    """The JSON:API error's detail (or title), clipped; '' when the body says nothing usable."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        # An HTML error page may echo the request URL: scrub auth parameters from it.
        return scrub(body[:120].decode("utf-8", "replace").strip())
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        e = errors[0]
        return str(e.get("detail") or e.get("title") or "")[:300]
    if isinstance(doc, dict) and "error" in doc:
        return str(doc["error"])[:300]
    return ""


@dataclass(frozen=True)
class Signature:
    """What an attempt was signed with (each is signed as it is sent): the clock offset, and
    the login (`generation`) whose token it carried."""

    offset: float
    generation: int


@dataclass(frozen=True)
class Outgoing:
    """One request as the layers hand it down (httpx's `Request`), all but its signature,
    which `_send_signed` adds to each attempt."""

    method: str
    path: str  # below `base`, as logs name it
    url: str
    params: Mapping[str, str]
    json: Any
    headers: Mapping[str, str]
    once: bool  # never repeated blind (`Transport.send`)
    attempts: int | None = None  # a 5xx allowance instead of the retry budget (`Transport.send`)


class ChannelSession:
    """Signed, retried requests to the Channel Content API, and the paged GET, through a
    transport (`Sender`; the retrying `Transport` unless one is given)."""

    def __init__(
        self,
        settings: UpstreamSettings,
        *,
        transport: Sender | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        fail_fast: bool = True,
    ) -> None:
        """`transport`: what sends each request (None: a `Transport` over an aiohttp session
        opened on entry and closed on exit; a given one is closed on exit too, as httpx's
        client closes its transport). `fail_fast=False` is for the daemon: an upstream
        unreachable from the start is logged and retried until it answers instead of raised
        (see `sync.channel.transport`)."""
        self.settings = settings
        self.fail_fast = fail_fast
        self.base = settings.base_url
        self._sleep = sleep
        self._clock = clock
        #: The configured accounts (one unless `[[upstream.accounts]]`), each with its own
        #: credentials, login lock and (per_account) budget, and which reads which route.
        self.accounts = Accounts(settings, clock=clock, sleep=sleep)
        self.api_version: str | None = None
        self._first_major: str | None = None
        self._warned_major = False
        self.log = get_logger("sync.channel")
        self._given = transport
        self._transport: Sender | None = transport
        #: Outlives the transport (the one built on entry counts into it), so metrics can read
        #: it at any time; a given transport's own.
        self.stats = transport.stats if transport is not None else Stats()
        #: The page size asked and the size the upstream proved it serves (`sync.channel.paging`).
        self.paging = Paging(settings.page_size)
        #: Where what the session learns outlives the process (`keep`): None keeps nothing.
        self._store: MetaStore | None = None
        #: The request budget every request of this client takes a slot from (None: off); with
        #: `budget = "per_account"`, the first account's (each account takes from its own).
        self.budget = self.accounts.first.budget

    async def __aenter__(self) -> Self:
        if self._given is not None:
            return self
        settings = self.settings
        self._transport = Transport(
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=max(settings.concurrency * 2, 10))
            ),
            TransportSettings(
                concurrency=settings.concurrency,
                timeout=settings.timeout,
                retry=RetryPolicy(settings.retry_budget, settings.max_backoff),
                fail_fast=self.fail_fast,
            ),
            sleep=self._sleep,
            upstream_now=lambda: self._clock() + self.credentials.offset,
            stats=self.stats,
            budget=self.budget,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for budget in self.accounts.budgets():
            await budget.close()
        if self._transport is not None:
            await self._transport.aclose()

    def keep(self, store: MetaStore) -> None:
        """Keep what this session learns in `store` (the mirror's `_sync_meta`) and restore
        what an earlier run learned there: the page size served (`Paging`) and which account
        reads which route (`Accounts`). Again with the same store, nothing."""
        if store is self._store:
            return
        self._store = store
        self.paging.keep(store.get, store.set)
        self.accounts.keep(store.get, store.set)

    @property
    def transport(self) -> Sender:
        """What sends each request: the one given, else the `Transport` built on entry."""
        if self._transport is None:
            raise RuntimeError("use `async with ChannelClient(...)`")
        return self._transport

    @property
    def unreachable(self) -> str | None:
        """Why the upstream was never reached, while a daemon's client keeps trying; else None."""
        return self._transport.unreachable_reason if self._transport is not None else None

    @property
    def credentials(self) -> Credentials:
        """The first account's credentials (the only ones unless `[[upstream.accounts]]`)."""
        return self.accounts.first.credentials

    @property
    def clock_offset(self) -> float:
        """Seconds to add to local time to get the upstream's `Date` clock: for signing only
        (the stamps' own scale is the client's `clock`, `sync.channel.clock`)."""
        return self.credentials.offset

    def observe(self, response: Response) -> None:
        """Every answer, retried ones too (the transport calls it per attempt): counted for the
        running job's summary, its `Date` teaching every account the upstream's clock, its
        `X-API-Version` kept (a new major logged once)."""
        tally.request()  # the running job's summary line counts it (`sync.core.tally`)
        for account in self.accounts.all:  # one upstream clock, whichever account asked
            account.credentials.learn_offset(response.headers.get("Date"))
        version = response.headers.get("X-API-Version")
        if not version:
            return
        self.api_version = version
        major = version.lstrip("v").split(".")[0]
        if self._first_major is None:
            self._first_major = major
        elif major != self._first_major and not self._warned_major:
            self._warned_major = True
            self.log.warning(
                "upstream.api_major_changed",
                first=f"v{self._first_major}",
                now=version,
                hint="the upstream changed its major API version; check the changelog",
            )

    # -- auth ----------------------------------------------------------------------------------

    async def login(self, account: Account | None = None) -> None:
        """POST /accounts/login as `account` (default the first); stores its session token."""
        account = account or self.accounts.first
        url = f"{self.base}/accounts/login"
        body = {
            "data": {
                "type": "accounts",
                "attributes": {
                    "email": account.email,
                    "password": account.settings.secret_password(),
                },
            }
        }
        resp = await self.transport.send(
            "POST",
            url,
            json=body,
            headers=JSONAPI_BODY,
            budget=account.budget,
            observe=self.observe,
        )
        if resp.status in (401, 403, 422):
            raise LoginRefusedError(
                "login refused",
                url=url,
                status=resp.status,
                hint="check [upstream] email and the password source"
                if not self.accounts.several
                else f"check [[upstream.accounts]] number {account.number}: its email and "
                "password source",
            )
        if resp.status >= 400:
            raise UpstreamError(
                f"login failed: {error_detail(resp.body)}", url=url, status=resp.status
            )
        doc = decode(resp.body, url, resp.status)
        token = ((doc.get("data") or {}).get("attributes") or {}).get("authentication_token")
        if not isinstance(token, str) or not token:
            raise BadResponseError(
                "login answered without an authentication_token", url=url, status=resp.status
            )
        account.credentials.set_token(token)
        # No e-mail here: it is the auth_id, and logs never carry auth parameters.
        self.log.info("upstream.logged_in")

    async def _ensure_login(self, account: Account, refused: int, *, relogin: bool) -> None:
        """Log `account` in unless a login came after the one whose token was refused
        (`refused`: its generation; one login for many concurrent 401s)."""
        async with account.login_lock:
            credentials = account.credentials
            if credentials.generation == refused or not credentials.has_token:
                await self.login(account)
                if relogin:
                    self.stats.relogins += 1

    # -- the request, layer by layer -----------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        once: bool = False,
        attempts: int | None = None,
    ) -> Response:
        """A signed request; logged in again on a 401 (`RELOGINS` at most); 4xx mapped to
        exceptions. `once`: never repeated blind after a 5xx or timeout (`Transport.send`,
        `MaybeAppliedError`);
        `attempts`: 5xx answers allowed before `RetriesExhaustedError` (None: the retry budget)."""
        outgoing = Outgoing(
            method,
            path,
            f"{self.base}{path}",
            dict(params or {}),
            json,
            {**(ACCEPT if json is None else JSONAPI_BODY), **(headers or {})},
            once,
            attempts,
        )
        return self._raise_for_status(await self._send_routing(outgoing), outgoing.url)

    def _raise_for_status(self, resp: Response, url: str) -> Response:
        """`resp` when it is no error; else the exception its status means."""
        if resp.status == 403:
            raise ForbiddenError(
                f"not allowed: {error_detail(resp.body)}",
                url=url,
                status=403,
                hint="the account's channels do not include this type",
            )
        if resp.status == 404:
            raise NotFoundError(f"not found: {error_detail(resp.body)}", url=url, status=404)
        if resp.status >= 400:
            raise UpstreamError(
                f"request rejected: {error_detail(resp.body)}", url=url, status=resp.status
            )
        return resp

    async def _send_routing(self, outgoing: Outgoing) -> Response:
        """Send as the account that reads the request's route (`sync.channel.accounts`); after
        a refusal (a 403, or a 404 from an account not proven to read the route), at once as
        the next account not refused there, until one reads it or every one refused (then the
        answer stands)."""
        route = route_of(outgoing.path)
        account = self.accounts.pick(route)
        tried = {account.number}
        while True:
            resp = await self._send_handling_auth(outgoing, account)
            after = self.accounts.next_after(route, account, resp.status, tried)
            if after is None or after.number in tried:
                return resp
            tried.add(after.number)
            account = after

    async def _send_handling_auth(self, outgoing: Outgoing, account: Account) -> Response:
        """Log in if there is no token yet; on a 401, log in again (unless another request
        already did after the refused token) and send once more, `RELOGINS` times at most."""
        credentials = account.credentials
        if not credentials.has_token:
            await self._ensure_login(account, credentials.generation, relogin=False)
        # Logins after a 401 so far. The first login does not count: a 401 just after it may be
        # a logout elsewhere in between, or a clock skew the 401's own `Date` header has just
        # taught us to correct.
        logins = 0
        while True:
            resp, signature = await self._send_handling_skew(outgoing, account, fresh=logins > 0)
            if resp.status != 401:
                return resp
            if logins >= RELOGINS:
                raise AuthError(
                    f"the upstream refused a fresh session (401) {logins} times: "
                    f"{error_detail(resp.body)}",
                    url=outgoing.url,
                    status=401,
                    hint="check the account, and that this machine's clock is roughly right",
                )
            self.log.info("upstream.relogin", reason="401", path=outgoing.path)
            await self._ensure_login(account, signature.generation, relogin=True)
            logins += 1

    async def _send_handling_skew(
        self, outgoing: Outgoing, account: Account, *, fresh: bool
    ) -> tuple[Response, Signature]:
        """Send signed; a 401 after a fresh login (`fresh`) is signed again (`RESKEWS` times at
        most) when its own `Date` taught another skew than the one the attempt was signed
        with: the upstream's clock moved, or an answer sent before the move was read after
        one sent after it. The answer and what its last attempt was signed with."""
        reskews = 0
        while True:
            resp, signature = await self._send_signed(outgoing, account)
            if (
                resp.status != 401
                or not fresh
                or account.credentials.offset == signature.offset
                or reskews >= RESKEWS
            ):
                return resp, signature
            reskews += 1
            self.log.info("upstream.resigned", reason="clock skew changed", path=outgoing.path)

    async def _send_signed(
        self, outgoing: Outgoing, account: Account
    ) -> tuple[Response, Signature]:
        """One logical request through the transport as `account`, each attempt signed afresh
        and taking a slot of the account's budget; the answer and what its last attempt was
        signed with."""
        credentials = account.credentials
        last = [Signature(credentials.offset, credentials.generation)]

        def signed() -> dict[str, str]:
            # Called per attempt: the timestamp (and so the token) must be current each time.
            last[0] = Signature(credentials.offset, credentials.generation)
            return {**outgoing.params, **credentials.params()}

        resp = await self.transport.send(
            outgoing.method,
            outgoing.url,
            params=signed,
            json=outgoing.json,
            headers=outgoing.headers,
            once=outgoing.once,
            budget=account.budget,
            attempts=outgoing.attempts,
            observe=self.observe,
        )
        return resp, last[0]

    async def get_document(
        self, path: str, params: Mapping[str, str]
    ) -> tuple[Any, Mapping[str, str]]:
        """GET `path` signed and retried; the parsed JSON body and the response headers."""
        resp = await self.request("GET", path, params)
        return decode(resp.body, resp.url, resp.status), resp.headers

    # -- the paged GET -------------------------------------------------------------------------

    def page_size(self, size: int | None = None) -> int:
        """The `page[size]` to ask: `size` (default `[upstream] page_size`), never more than
        the upstream proved it serves or accepts (`Paging`)."""
        return min(size or self.paging.asked, self.paging.size)

    def page_query(self, number: int, size: int | None = None) -> dict[str, str]:
        """`page[size]` (`page_size`) and `page[number]`, both explicit (the spec advises it)."""
        return {"page[size]": str(self.page_size(size)), "page[number]": str(number)}

    async def get_page(
        self, path: str, number: int, params: Mapping[str, str], size: int | None = None
    ) -> Page:
        """Page `number` of a plain listing (no include fallback, no ETag), validated."""
        resp = await self.get_listing(path, {**self.page_query(number, size), **params})
        doc = decode(resp.body, resp.url, resp.status)
        return to_page(doc, number, resp.url, resp.status, self.api_version)

    async def get_listing(
        self,
        path: str,
        query: dict[str, str],
        headers: Mapping[str, str] | None = None,
        attempts: int | None = None,
    ) -> Response:
        """GET one listing page; a 400 naming `page[size]` is asked again smaller (and the
        smaller size kept for every later request, `Paging.refused`). `attempts`: see `request`."""
        while True:
            try:
                return await self.request("GET", path, query, headers=headers, attempts=attempts)
            except UpstreamError as exc:
                if exc.status != 400 or "page" not in str(exc).lower():
                    raise
                asked = int(query.get("page[size]", "0") or 0)
                if asked > self.paging.asked or (asked > 1 and self.paging.refused()):
                    query = {**query, "page[size]": str(self.page_size(asked))}
                    continue
                raise

    def walk(
        self, fetch: Callable[[int], Awaitable[Page]], start: int = 1, *, promised: bool = True
    ) -> AsyncIterator[Page]:
        """The page-number loop every listing walks through (`Paging.walk_numbers`)."""
        return self.paging.walk_numbers(fetch, start, promised=promised)
