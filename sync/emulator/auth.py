"""Accounts, sessions and the per-request signature check of the emulator.

Every login of an account returns the same token; a logout (or a forced logout) replaces the
token, so every session sharing it ends and the next login gets a new one. A request is signed
with `auth_id` (id or e-mail), `auth_timestamp` (10 digits, within `SKEW` seconds of the
emulator's clock, or the window `Hard.signing_window` sets) and `auth_token` =
md5(`<timestamp>:<token>`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

SKEW = 30
ALL_CHANNELS = frozenset({"ALL", "deal", "mall", "editorial", "store", "product"})


@dataclass
class Account:
    id: int
    email: str
    password: str
    token: str
    channels: frozenset[str]
    properties: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


class AuthFailure(Exception):
    """401 with this detail."""


class Accounts:
    """The emulator's accounts and their tokens."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.by_email: dict[str, Account] = {}
        self.by_id: dict[int, Account] = {}

    def create(
        self,
        email: str,
        password: str,
        properties: dict[str, Any] | None = None,
        channels: frozenset[str] | None = None,
        stamp: str = "",
    ) -> Account:
        props = dict(properties or {})
        if channels is None:
            raw = props.get("channels")
            channels = frozenset(raw) | {"ALL"} if isinstance(raw, list) else ALL_CHANNELS
        account = Account(
            len(self.by_id) + 1,
            email,
            password,
            secrets.token_hex(16),
            frozenset(channels),
            props,
            stamp,
        )
        self.by_email[email] = account
        self.by_id[account.id] = account
        return account

    def login(self, email: str, password: str) -> Account | None:
        account = self.by_email.get(email)
        if account is None or not hmac.compare_digest(account.password, password):
            return None
        return account

    def logout(self, account: Account) -> None:
        account.token = secrets.token_hex(16)

    def force_logout(self) -> None:
        for account in self.by_id.values():
            self.logout(account)

    def check(self, params: Mapping[str, str], window: float = SKEW) -> Account:
        """The account a signed request belongs to, or AuthFailure (`window`: the largest
        skew accepted, in seconds)."""
        auth_id, ts, token = (
            params.get("auth_id"),
            params.get("auth_timestamp"),
            params.get("auth_token"),
        )
        if not auth_id or not ts or not token:
            raise AuthFailure("auth_id, auth_timestamp and auth_token are required")
        if len(ts) != 10 or not ts.isdigit():
            raise AuthFailure("auth_timestamp must be a 10-digit Unix time")
        if abs(int(ts) - self.clock()) > window:
            raise AuthFailure("auth_timestamp is too far from the server's time")
        if len(token) != 32 or any(c not in "0123456789abcdef" for c in token):
            raise AuthFailure("auth_token is malformed")
        account = self.by_id.get(int(auth_id)) if auth_id.isdigit() else self.by_email.get(auth_id)
        if account is None:
            raise AuthFailure("unknown auth_id")
        expected = hashlib.md5(f"{ts}:{account.token}".encode(), usedforsecurity=False).hexdigest()
        if not hmac.compare_digest(expected, token):
            raise AuthFailure("auth_token does not match (logged out?)")
        return account
