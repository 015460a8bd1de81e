"""Several accounts on one session: which account sends a request, learned per route from 403s.

An upstream may issue one account per channel set (deal, mall, editorial, store, product); how a
channel limits an account is "not shown" by the spec, so nothing is assumed: each request is
sent by the account that last read its ROUTE (the path with its ids replaced, `/deals/{id}`,
`/malls/{id}/stores`), else by the first account not yet refused there. A 403 marks the
(route, account) refused and the request goes at once to the next account; only when every
account is refused does the 403 reach the caller (`ForbiddenError`: the type is skipped with
its reason, as with one account).

What was learned (route -> the e-mail that reads it, and the refusals) is kept in the mirror
beside the upstream profile (`_sync_meta`, `upstream_accounts`), so a restart does not learn it
again through 403s, and `ccsync status` shows which account reads which type. With one account
there is nothing to choose: nothing is learned or stored, and every request is what it was.

Each account has its own credentials (token, login lock) and, with `budget = "per_account"`,
its own request budget; the aiohttp session and the transport are shared. Passwords and tokens
never reach a log line or the mirror; e-mails stay out of the logs too (accounts are named by
their place in the configuration there).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson

from sync.channel.budget import RequestBudget
from sync.channel.signing import Credentials
from sync.core.config import AccountSettings, UpstreamSettings
from sync.core.logs import get_logger

META_KEY = "upstream_accounts"
#: An id path segment: replaced by `{id}` in a route.
_ID_SEGMENT = re.compile(r"/\d+(?=/|$)")

_log = get_logger("sync.channel")


def route_of(path: str) -> str:
    """The route of a request path, as the profile names routes: `/malls/12/stores` ->
    `/malls/{id}/stores`, `/deals/5` -> `/deals/{id}`."""
    return _ID_SEGMENT.sub("/{id}", path)


@dataclass
class Account:
    """One configured account: its settings, its session token and clock offset, its login
    lock (concurrent 401s share one login) and the request budget it takes slots from."""

    number: int  # its place in the configuration, 1-based: what logs name
    settings: AccountSettings
    credentials: Credentials
    budget: RequestBudget | None
    login_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def email(self) -> str:
        return self.settings.email


#: The account the current task's requests are pinned to (`Accounts.pinned`), if any.
_pinned: ContextVar[Account | None] = ContextVar("sync_pinned_account", default=None)


class Accounts:
    """The accounts of one session, and which of them reads which route."""

    def __init__(
        self,
        settings: UpstreamSettings,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        rate = settings.max_requests_per_second

        def budget() -> RequestBudget | None:
            if rate <= 0:
                return None
            return RequestBudget(rate, sleep=sleep, concurrency=settings.concurrency)

        shared = budget()
        self.all = [
            Account(
                number,
                account,
                Credentials(account.email, clock),
                shared if settings.budget == "shared" or number == 1 else budget(),
            )
            for number, account in enumerate(settings.all_accounts(), start=1)
        ]
        #: route -> the e-mail of the account last proven to read it.
        self.readers: dict[str, str] = {}
        #: route -> the e-mails of the accounts it refused (403).
        self.refused: dict[str, set[str]] = {}
        self._put: Callable[[str, str], None] | None = None

    @property
    def first(self) -> Account:
        return self.all[0]

    @property
    def several(self) -> bool:
        return len(self.all) > 1

    def budgets(self) -> list[RequestBudget]:
        """Each distinct request budget once (one when shared)."""
        out: list[RequestBudget] = []
        for account in self.all:
            if account.budget is not None and all(account.budget is not b for b in out):
                out.append(account.budget)
        return out

    @contextmanager
    def pinned(self, account: Account) -> Iterator[None]:
        """Send every request of the current task (and the tasks it starts) as `account`, with
        no routing: a webhook subscription belongs to the account that made it."""
        token = _pinned.set(account)
        try:
            yield
        finally:
            _pinned.reset(token)

    def pick(self, route: str) -> Account:
        """The account to send a request on `route`: the pinned one, else the one last proven
        to read it, else the first not refused there (the first when all are)."""
        if (account := _pinned.get()) is not None:
            return account
        reader = self.readers.get(route)
        refused = self.refused.get(route, set())
        for account in self.all:
            if account.email == reader:
                return account
        return next((a for a in self.all if a.email not in refused), self.first)

    def reader(self, route: str) -> Account:
        """The account proven to read `route`, else the first (what a webhook topic of that
        type is subscribed by)."""
        email = self.readers.get(route)
        return next((a for a in self.all if a.email == email), self.first)

    def next_after(
        self, route: str, account: Account, status: int, tried: set[int]
    ) -> Account | None:
        """Learn from `account`'s answer `status` on `route` (the accounts of `tried` asked it
        already); the account to send the request again with, or None: the answer stands.

        A 403 refuses the account there. How the upstream answers a channel it does not
        permit is "not shown", so a 404 from an account not proven to read the route is asked
        again as the others too: only when every account answers 404 is it a fact (a mall that
        is gone), and when another reads it, the ones that answered 404 are refused there."""
        if not self.several or _pinned.get() is not None:
            return None
        if status == 404 and self.readers.get(route) != account.email:
            refused = self.refused.get(route, set())
            return next(
                (a for a in self.all if a.number not in tried and a.email not in refused), None
            )
        if status == 403:
            refused = self.refused.setdefault(route, set())
            if account.email not in refused or self.readers.get(route) == account.email:
                refused.add(account.email)
                if self.readers.get(route) == account.email:
                    del self.readers[route]
                self._save()
            after = next((a for a in self.all if a.email not in refused), None)
            if after is not None:
                _log.info(
                    "upstream.account_refused",
                    route=route,
                    account=account.number,
                    next=after.number,
                )
            return after
        if status < 400 and self.readers.get(route) != account.email:
            self.readers[route] = account.email
            refused = self.refused.setdefault(route, set())
            refused.discard(account.email)
            refused.update(a.email for a in self.all if a.number in tried and a is not account)
            self._save()
        return None

    # -- kept in the mirror (`_sync_meta`), so a restart does not learn it again ---------------

    def keep(self, get: Callable[[str], str | None], put: Callable[[str, str], None]) -> None:
        """Restore what an earlier run learned from `get(META_KEY)` (what this run learned
        already wins), and `put` every change. Nothing with one account."""
        if not self.several:
            return
        self._put = put
        learned = bool(self.readers or self.refused)
        self.load(get(META_KEY))
        if learned:
            self._save()

    def dump(self) -> str:
        return orjson.dumps(
            {
                "readers": dict(sorted(self.readers.items())),
                "refused": {r: sorted(e) for r, e in sorted(self.refused.items()) if e},
            }
        ).decode()

    def load(self, text: str | None) -> None:
        """Merge what an earlier run stored (never raises on a damaged value)."""
        raw = loads(text)
        for route, email in raw["readers"].items():
            self.readers.setdefault(route, email)
        for route, emails in raw["refused"].items():
            if self.readers.get(route) not in emails:
                self.refused.setdefault(route, set()).update(emails)

    def _save(self) -> None:
        if self._put is not None:
            self._put(META_KEY, self.dump())


def loads(text: str | None) -> dict[str, dict[str, Any]]:
    """The stored record as `{"readers": {route: email}, "refused": {route: [emails]}}`, empty
    when missing or damaged (`ccsync status` reads it too)."""
    empty: dict[str, dict[str, Any]] = {"readers": {}, "refused": {}}
    if not text:
        return empty
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        return empty
    if not isinstance(raw, dict):
        return empty
    readers = raw.get("readers")
    refused = raw.get("refused")
    return {
        "readers": {
            str(k): v
            for k, v in (readers if isinstance(readers, dict) else {}).items()
            if isinstance(v, str)
        },
        "refused": {
            str(k): [e for e in v if isinstance(e, str)]
            for k, v in (refused if isinstance(refused, dict) else {}).items()
            if isinstance(v, list)
        },
    }
