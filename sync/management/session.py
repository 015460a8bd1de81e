"""`ManagementSession`: the authenticated, retried request to the management API v1.

It sends the context headers the spec lists (X-User-Agent, X-Product-Name, X-Loyalty-Club-Slug,
X-Customer, X-Locale) and the credentials (Authorization: Bearer and/or X-Client-Authorization),
through the same retrying transport as the Channel Content API client (`sync.channel.transport`).
An answer's status becomes the error it means: a 404 `NotFoundError` with the API's
record-not-found message, a 422 `InvalidParametersError` carrying every entry of `details`. Every
value that lands in a path is percent-encoded as one segment (`segment`). The operations are
built on it: `sync.management.press` (the press release list), `sync.management.client` (the
article and message updates).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import aiohttp
import orjson

from sync.channel.transport import Response, RetryPolicy, Transport, TransportSettings
from sync.core.errors import BadResponseError, InvalidParametersError, NotFoundError, UpstreamError
from sync.core.sections import ManagementSettings


def segment(value: object) -> str:
    """`value` as one path segment: every reserved character percent-encoded, `/` included."""
    return quote(str(value), safe="")


class ManagementSession:
    """Authenticated, retried requests to the management API, answers mapped to errors."""

    def __init__(
        self,
        settings: ManagementSettings,
        *,
        retry_budget: float = 60.0,
        max_backoff: float = 10.0,
        timeout: float = 30.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        fail_fast: bool = True,
    ) -> None:
        self.settings = settings
        self._fail_fast = fail_fast
        self._session: aiohttp.ClientSession | None = None
        self._transport: Transport | None = None
        self._opts = {"retry_budget": retry_budget, "max_backoff": max_backoff, "timeout": timeout}
        self._sleep = sleep

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession()
        self._transport = Transport(
            self._session,
            TransportSettings(
                concurrency=2,
                timeout=self._opts["timeout"],
                retry=RetryPolicy(self._opts["retry_budget"], self._opts["max_backoff"]),
                fail_fast=self._fail_fast,
                base_url_key="[management] base_url",
            ),
            sleep=self._sleep,
            clock=time.monotonic,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()

    def headers(self, locale: str | None = None) -> dict[str, str]:
        """The context and credential headers of every request."""
        s = self.settings
        h = {
            "Accept": "application/json",
            "X-User-Agent": s.client_id,
            "X-Product-Name": s.product,
            "X-Loyalty-Club-Slug": s.loyalty_club,
        }
        if s.customer:
            h["X-Customer"] = s.customer
        if s.bearer_token is not None:
            h["Authorization"] = f"Bearer {s.bearer_token.get_secret_value()}"
        if s.client_token is not None:
            h["X-Client-Authorization"] = s.client_token.get_secret_value()
        if locale:
            h["X-Locale"] = locale
        return h

    async def _exchange(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        locale: str | None = None,
    ) -> tuple[Response, str]:
        """One request, answered (after the transport's retries); `path` has its user-given
        segments encoded already (`segment`)."""
        assert self._transport is not None, "use `async with ManagementClient(...)`"
        url = f"{self.settings.base_url}{path}"
        resp: Response = await self._transport.send(
            method, url, params=(lambda: params or {}), json=body, headers=self.headers(locale)
        )
        return resp, url

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        locale: str | None = None,
    ) -> Any:
        resp, url = await self._exchange(method, path, params=params, body=body, locale=locale)
        return self._answer(resp, url)

    def _answer(self, resp: Response, url: str) -> Any:
        """The JSON body of a success, or the error its status means."""
        try:
            doc = orjson.loads(resp.body) if resp.body else {}
        except orjson.JSONDecodeError:
            raise BadResponseError(
                "the management API sent a body that is not JSON", url=url, status=resp.status
            ) from None
        if resp.status == 404:
            message = doc.get("error") if isinstance(doc, dict) else None
            raise NotFoundError(str(message or "Record not found"), url=url, status=404)
        if resp.status == 422:
            details = doc.get("details") if isinstance(doc, dict) else None
            raise InvalidParametersError(
                str(doc.get("error", "Invalid parameters"))
                if isinstance(doc, dict)
                else "Invalid parameters",
                details=details if isinstance(details, dict) else {},
                url=url,
            )
        if resp.status in (401, 403):
            raise UpstreamError(
                "the management API refused the credentials",
                url=url,
                status=resp.status,
                hint="check [management] bearer_token / client_token and the product and club",
            )
        if resp.status >= 400:
            raise UpstreamError(f"request rejected: {doc}", url=url, status=resp.status)
        return doc
