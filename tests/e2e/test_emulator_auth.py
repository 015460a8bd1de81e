"""The emulator's `/accounts` routes and signature check over real HTTP: login, logout, bad
signatures, the clock's skew window, channels, JSON:API request bodies (`sync.emulator.accounts`,
`sync.emulator.auth`)."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from sync.emulator import Emulator
from tests.support.emulator_client import JSONAPI, Signed, valid

# -- auth ----------------------------------------------------------------------------------------


async def test_accounts_login_logout(emulator: Emulator) -> None:
    async with aiohttp.ClientSession() as http:
        base = emulator.base_url
        body = {
            "data": {
                "type": "accounts",
                "attributes": {"email": "new@example.com", "password": "pw-123456"},
            }
        }
        async with http.post(f"{base}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 201 and r.content_type == "application/json"
        async with http.post(f"{base}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 422
        client = Signed(http, base, "new@example.com", "pw-123456")
        first = (await client.login())["data"]["attributes"]["authentication_token"]
        assert (await client.login())["data"]["attributes"]["authentication_token"] == first
        assert (await client.get("/malls"))[0] == 200
        status, headers = await client.logout()
        assert status == 204
        assert "httponly" in headers["Set-Cookie"].lower()
        assert (await client.get("/malls"))[0] == 401
        assert (await client.login())["data"]["attributes"]["authentication_token"] != first
        bad = {
            "data": {
                "type": "accounts",
                "attributes": {"email": "new@example.com", "password": "wrong"},
            }
        }
        async with http.post(f"{base}/accounts/login", json=bad, headers=JSONAPI) as r:
            assert r.status == 401


async def test_logout_takes_the_specs_body_and_ends_every_session_of_the_token(
    emulator: Emulator,
) -> None:
    async with aiohttp.ClientSession() as http:
        one = Signed(http, emulator.base_url, emulator.email, emulator.password)
        two = Signed(http, emulator.base_url, emulator.email, emulator.password)
        await one.login()
        await two.login()
        assert one.token == two.token  # one token, two sessions
        url = f"{emulator.base_url}/accounts/logout"
        # the signature in the query and no body is not the spec's logout
        async with http.delete(url, params=one.auth()) as r:
            assert r.status == 400
            valid(await r.json(content_type=None))
        for broken, status in (
            ({k: v for k, v in one.logout_body().items() if k != "format"}, 400),
            ({**one.logout_body(), "account": "me"}, 400),
            ({**one.logout_body(), "account": {"email": "someone@else.example"}}, 401),
            ({**one.logout_body(), "auth_token": "0" * 32}, 401),
        ):
            async with http.delete(url, json=broken) as r:
                assert r.status == status, broken
        assert (await two.get("/malls"))[0] == 200  # nothing ended yet
        async with http.delete(url, json=one.logout_body()) as r:
            assert r.status == 204 and await r.read() == b""
            cookie = r.cookies["_session_id"]
            assert cookie["httponly"] and cookie["path"] == "/"
        assert (await one.get("/malls"))[0] == 401
        assert (await two.get("/malls"))[0] == 401  # the other session of that token too
        await two.login()
        assert two.token != one.token and (await two.get("/malls"))[0] == 200


async def test_signature_failures(api: Signed, emulator: Emulator) -> None:
    assert (await api.get("/malls", auth=False))[0] == 401
    import time

    for params in (
        api.auth(int(time.time()) - 120),  # stale
        {**api.auth(), "auth_token": "not-md5"},  # malformed
        {**api.auth(), "auth_timestamp": "12345"},  # not 10 digits
        {k: v for k, v in api.auth().items() if k != "auth_id"},  # missing
    ):
        async with api.http.get(f"{api.base}/malls", params=params) as r:
            assert r.status == 401
            valid(await r.json(content_type=None))
    emulator.force_logout()
    assert (await api.get("/malls"))[0] == 401


async def test_clock_offset_outside_the_skew_window(api: Signed, emulator: Emulator) -> None:
    emulator.faults.clock_offset = 120
    status, headers, _ = await api.get("/malls")
    assert status == 401
    import time
    from email.utils import parsedate_to_datetime

    api.offset = parsedate_to_datetime(headers["Date"]).timestamp() - time.time()
    assert (await api.get("/malls"))[0] == 200


async def test_channels_restrict_routes(emulator: Emulator) -> None:
    async with aiohttp.ClientSession() as http:
        body = {
            "data": {
                "type": "accounts",
                "attributes": {
                    "email": "deal@example.com",
                    "password": "pw-1",
                    "properties": {"channels": ["deal"]},
                },
            }
        }
        async with http.post(f"{emulator.base_url}/accounts", json=body, headers=JSONAPI) as r:
            assert r.status == 201
        client = Signed(http, emulator.base_url, "deal@example.com", "pw-1")
        await client.login()
        status, _, doc = await client.get("/articles")
        assert status == 403
        valid(doc)
        assert (await client.get("/deals"))[0] == 200
        assert (await client.get("/malls"))[0] == 200


async def test_a_jsonapi_body_of_another_content_type_is_415(emulator: Emulator) -> None:
    body = {
        "data": {
            "type": "accounts",
            "attributes": {"email": emulator.email, "password": emulator.password},
        }
    }
    async with aiohttp.ClientSession() as http:
        url = f"{emulator.base_url}/accounts/login"
        async with http.post(url, json=body) as r:  # application/json
            assert r.status == 415
            doc = await r.json(content_type=None)
            assert "application/vnd.api+json" in doc["errors"][0]["detail"]
        async with http.post(url, json=body, headers=JSONAPI) as r:
            assert r.status == 201
        emulator.app.strict_content_type = False  # the lenient switch
        async with http.post(url, json=body) as r:
            assert r.status == 201


async def test_the_client_sends_jsonapi_bodies_as_jsonapi(
    emulator: Emulator, tmp_path: Path
) -> None:
    from sync.channel.client import ChannelClient
    from sync.core.config import parse_config

    settings = parse_config(
        {
            "upstream": {
                "base_url": emulator.base_url,
                "email": emulator.email,
                "password": emulator.password,
            },
            "mirror": {"path": str(tmp_path / "m.db")},
        }
    )
    assert emulator.app.strict_content_type
    async with ChannelClient(settings.upstream) as client:
        await client.session.login()  # 415 before: aiohttp's json= says application/json
        resp = await client.session.request(
            "POST",
            "/webhooks",
            json={
                "data": {
                    "type": "webhooks",
                    "attributes": {"callback_url": "http://127.0.0.1:9/x", "topic": "deals"},
                }
            },
        )
        assert resp.status == 201
