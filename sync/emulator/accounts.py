"""The `/accounts` routes: create an account, log in, log out (the spec's Authentication section).

The accounts, their tokens and the signature check are `sync.emulator.auth`'s; these handlers
read the JSON:API bodies and answer with the account document (its `authentication_token`).
"""

from __future__ import annotations

import uuid

import orjson
from aiohttp import web

from sync.emulator.app import EmulatorApp
from sync.emulator.auth import SKEW, Account, AuthFailure
from sync.emulator.responses import error, json_response
from sync.model.stamps import iso_ms

#: The fields of the logout body, all required.
LOGOUT_FIELDS = ("account", "auth_id", "auth_token", "auth_timestamp", "format")


class AccountRoutes:
    """Handlers of the `/accounts` routes over `emu`."""

    def __init__(self, emu: EmulatorApp) -> None:
        self.emu = emu

    def _document(self, account: Account) -> web.Response:
        attrs = {
            "email": account.email,
            "authentication_token": account.token,
            "created_at": account.created_at,
            "updated_at": account.created_at,
            "confirmed_at": None,
            "token_expired_at": None,
            "properties": account.properties,
        }
        body = {
            "data": {
                "id": str(account.id),
                "type": "accounts",
                "links": {"self": f"{self.emu.base}/accounts/{account.id}"},
                "attributes": attrs,
            }
        }
        return json_response(body, 201)

    async def create_account(self, request: web.Request) -> web.StreamResponse:
        emu = self.emu
        attrs = await emu.attributes(request)
        email, password = attrs.get("email"), attrs.get("password")
        if not isinstance(email, str) or not email or not isinstance(password, str) or not password:
            return error(422, "Unprocessable Entity", "email and password are required")
        if email in emu.accounts.by_email:
            return error(422, "Unprocessable Entity", "email has already been taken")
        props = attrs.get("properties") if isinstance(attrs.get("properties"), dict) else None
        return self._document(emu.accounts.create(email, password, props, stamp=iso_ms(emu.now())))

    async def login(self, request: web.Request) -> web.StreamResponse:
        attrs = await self.emu.attributes(request)
        account = self.emu.accounts.login(
            str(attrs.get("email", "")), str(attrs.get("password", ""))
        )
        if account is None:
            return error(401, "Unauthorized", "invalid email or password")
        return self._document(account)

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """DELETE /accounts/logout with the spec's body {account, auth_id, auth_token,
        auth_timestamp, format}: the signature is read from the body (not the query); `account`
        names the signed account by `email` or `id` (a `password` in it must be right). Ends every
        session of the token: the account's token is replaced."""
        emu = self.emu
        shape = "body must be {account: {email, ...}, auth_id, auth_token, auth_timestamp, format}"
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return error(400, "Bad Request", shape)
        if not isinstance(body, dict):
            return error(400, "Bad Request", shape)
        missing = [k for k in LOGOUT_FIELDS if k not in body]
        if missing:
            return error(400, "Bad Request", f"{shape}; missing {', '.join(missing)}", missing[0])
        creds, fmt = body["account"], body["format"]
        if not isinstance(creds, dict) or not isinstance(fmt, str):
            return error(400, "Bad Request", f"{shape}; account is an object, format a string")
        emu.accounts.clock = emu.now
        try:
            account = emu.accounts.check(
                {k: str(body[k]) for k in ("auth_id", "auth_token", "auth_timestamp")},
                emu.hard.signing_window or SKEW,
            )
        except AuthFailure as exc:
            return error(401, "Unauthorized", str(exc))
        named = str(creds.get("email", creds.get("id", "")))
        if named not in (account.email, str(account.id)) or (
            "password" in creds and creds["password"] != account.password
        ):
            return error(401, "Unauthorized", "account does not match the signed auth_id")
        emu.accounts.logout(account)
        resp = web.Response(status=204)
        resp.set_cookie("_session_id", uuid.uuid4().hex, httponly=True, path="/")
        return resp
