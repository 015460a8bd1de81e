"""Authentication: the session token from POST /accounts/login and the per-request signature.

Every data request carries `auth_id` (the e-mail), `auth_timestamp` (10-digit Unix time) and
`auth_token` = md5(`<auth_timestamp>:<authentication_token>`), recomputed per request. The
timestamp must be within a few seconds of the upstream's clock, so the offset between our clock
and the upstream's `Date` header is learned from every response and applied.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

from sync.core.redact import register


def sign(token: str, timestamp: int) -> str:
    """Lowercase md5 hex of `<timestamp>:<token>`."""
    return hashlib.md5(f"{timestamp}:{token}".encode(), usedforsecurity=False).hexdigest()


class Credentials:
    """The account's session token (never logged) and the clock offset to the upstream."""

    def __init__(self, email: str, clock: Callable[[], float] = time.time) -> None:
        self.email = email
        self.clock = clock
        self._token: str | None = None
        self.offset = 0.0
        self.generation = 0  # bumps on every login, so concurrent 401s re-login only once

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def set_token(self, token: str) -> None:
        register(token)  # masked in any text from now on (`sync.core.redact`)
        self._token = token
        self.generation += 1

    def params(self, skew: float = 0.0) -> dict[str, str]:
        """The three signed query parameters for one request (`skew`: seconds added to the
        timestamp on purpose, to probe how wide the upstream's signing window is)."""
        assert self._token is not None, "login first"
        ts = int(self.clock() + self.offset + skew)
        return {
            "auth_id": self.email,
            "auth_timestamp": f"{ts:010d}",
            "auth_token": sign(self._token, ts),
        }

    def learn_offset(self, date_header: str | None) -> None:
        """Correct for clock skew using the server's `Date` header (1 s resolution)."""
        if not date_header:
            return
        try:
            server = parsedate_to_datetime(date_header).timestamp()
        except (TypeError, ValueError):
            return
        skew = server - self.clock()
        # Date has whole seconds: only correct skews the header can actually show.
        self.offset = skew if abs(skew) >= 1.5 else 0.0
