"""Talking to the emulator from a test, independent of `sync.channel` on purpose (a bug there
must not hide one here): a minimal signed client, a listing walked page by page (every page
checked against the JSON:API 1.0 schema), the `/_emulator` control routes, the notices sent."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import jsonschema
import orjson

from sync.emulator import Emulator

#: The `make_emulator` fixture: `async with make_emulator(resources=..., seed=...) as emu:`.
MakeEmulator = Callable[..., contextlib.AbstractAsyncContextManager[Emulator]]
JSONAPI = {"Content-Type": "application/vnd.api+json"}
Notice = tuple[str, str, int]
SCHEMA = json.loads((Path(__file__).parents[1] / "data" / "jsonapi-schema-1.0.json").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def valid(doc: Any) -> None:
    """Assert `doc` is a valid JSON:API 1.0 document."""
    errors = sorted(VALIDATOR.iter_errors(doc), key=str)
    assert not errors, errors[0]


class Signed:
    """Logs in and sends signed requests; returns (status, headers, parsed body or None)."""

    def __init__(self, http: aiohttp.ClientSession, base: str, email: str, password: str) -> None:
        self.http, self.base, self.email, self.password = http, base, email, password
        self.token = ""
        self.offset = 0.0

    async def login(self) -> dict[str, Any]:
        body = {
            "data": {
                "type": "accounts",
                "attributes": {"email": self.email, "password": self.password},
            }
        }
        async with self.http.post(f"{self.base}/accounts/login", json=body, headers=JSONAPI) as r:
            assert r.status == 201, await r.text()
            doc = orjson.loads(await r.read())
        self.token = doc["data"]["attributes"]["authentication_token"]
        return dict(doc)

    def auth(self, ts: int | None = None) -> dict[str, str]:
        t = int(time.time() + self.offset) if ts is None else ts
        digest = hashlib.md5(f"{t}:{self.token}".encode(), usedforsecurity=False).hexdigest()
        return {"auth_id": self.email, "auth_timestamp": f"{t:010d}", "auth_token": digest}

    def logout_body(self) -> dict[str, Any]:
        """The body the spec shows for DELETE /accounts/logout."""
        return {"account": {"email": self.email}, **self.auth(), "format": "json"}

    async def logout(self) -> tuple[int, Any]:
        async with self.http.delete(f"{self.base}/accounts/logout", json=self.logout_body()) as r:
            await r.read()
            return r.status, r.headers

    async def get(
        self,
        path: str,
        params: dict[str, str] | None = None,
        *,
        auth: bool = True,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        q = dict(params or {})
        if auth:
            q.update(self.auth())
        async with self.http.get(f"{self.base}{path}", params=q, headers=headers) as r:
            raw = await r.read()
            return r.status, r.headers, (orjson.loads(raw) if raw else None)

    async def send(self, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
        async with self.http.request(
            method,
            f"{self.base}{path}",
            params=self.auth(),
            json=body,
            headers=JSONAPI if body is not None else None,
        ) as r:
            raw = await r.read()
            return r.status, r.headers, (orjson.loads(raw) if raw else None)


@contextlib.asynccontextmanager
async def signed(emu: Emulator) -> AsyncIterator[Signed]:
    """A `Signed` client of `emu`, logged in."""
    async with aiohttp.ClientSession() as http:
        client = Signed(http, emu.base_url, emu.email, emu.password)
        await client.login()
        yield client


def notices(emu: Emulator) -> list[Notice]:
    """The notices the data set sends from now on: (kind, type, id)."""
    seen: list[Notice] = []
    emu.data.listeners.append(lambda kind, t, rid, _d: seen.append((kind, t, rid)))
    return seen


async def walk(api: Signed, path: str, params: dict[str, str] | None = None) -> list[Any]:
    """Every page of a listing, each checked against the JSON:API schema."""
    pages, number = [], 1
    while True:
        status, _, doc = await api.get(path, {**(params or {}), "page[number]": str(number)})
        assert status == 200, doc
        valid(doc)
        pages.append(doc)
        last = int(parse_qs(urlsplit(doc["links"]["last"]).query)["page[number]"][0])
        if number >= last:
            return pages
        number += 1


async def listed(api: Signed, path: str, params: dict[str, str] | None = None) -> list[str]:
    return [
        r["id"]
        for p in await walk(api, path, {"page[size]": "100", **(params or {})})
        for r in p["data"]
    ]


async def control(emu: Emulator, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """Call the emulator's control route `/_emulator/<path>`: status, parsed body or None."""
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{emu.base_url}/_emulator/{path}", json=body) as r,
    ):
        raw = await r.read()
        return r.status, (await r.json(content_type=None) if raw else None)


def feed(emu: Emulator) -> list[dict[str, Any]]:
    return list(emu.snapshot("deletions").values())
