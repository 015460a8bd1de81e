"""The management API v1 against the emulator: press releases mirrored per locale and pruned;
article and message updates from the CLI with validation, dry runs, 404 and 422."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sync.core.config import parse_config
from sync.core.errors import ConfigError
from sync.emulator import Emulator
from sync.management.client import ManagementClient
from sync.management.fields import load_update
from sync.management.press import mirror_press_releases
from sync.store import Mirror
from sync.store.press import PressReleases
from tests.support.management import ccsync as sync
from tests.support.management import management_config, write


def mgmt(emu: Emulator, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": emu.base_url,
        "product": "loyalty",
        "loyalty_club": "demo-club",
        "bearer_token": emu.management.token,
        "locales": ["en", "de"],
        "per_page": 25,
        **extra,
    }


async def test_press_releases_two_locales_several_pages_then_pruned(
    emulator: Emulator, tmp_path: Path
) -> None:
    settings = parse_config(
        {
            "upstream": {"base_url": emulator.base_url, "email": "a@b.c", "password": "x"},
            "management": mgmt(emulator),
        }
    )
    assert settings.management is not None
    mirror = Mirror.open(tmp_path / "m.db")
    store = PressReleases(mirror.conn)
    total = len(emulator.management.press)
    assert total > 25 * 3  # several pages per locale
    async with ManagementClient(settings.management) as client:
        result = await mirror_press_releases(client, store, ["en", "de"])
        assert result == {"en": (total, 0), "de": (total, 0)}
        rows = dict(
            mirror.conn.execute(
                "select locale, count(*) from mgmt_press_releases group by locale"
            ).fetchall()
        )
        assert rows == {"en": total, "de": total}
        title_de = mirror.conn.execute(
            "select title from mgmt_press_releases where id = 1 and locale = 'de'"
        ).fetchone()[0]
        assert title_de == emulator.management.press[1]["title"]["de"]
        image = json.loads(
            mirror.conn.execute(
                "select image from mgmt_press_releases where id = 2 and locale = 'en'"
            ).fetchone()[0]
        )
        assert image["url"].endswith("/pr/2/image.jpg")
        cats = {
            r[0]
            for r in mirror.conn.execute(
                "select category_id from mgmt_press_releases_categories where press_release_id = 3 and locale = 'en'"
            )
        }
        assert cats == set(emulator.management.press[3]["category_ids"])
        del emulator.management.press[5]
        result = await mirror_press_releases(client, store, ["en", "de"])
        assert result["en"] == (total - 1, 1) and result["de"] == (total - 1, 1)
        assert (
            mirror.conn.execute("select count(*) from mgmt_press_releases where id = 5").fetchone()[
                0
            ]
            == 0
        )
    mirror.close()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"id": 3, "status": "draft"}, "id is read-only"),
        ({"url": "x", "created_at": "y"}, "url, created_at are read-only"),
        ({"status": "archived"}, "status"),
        ({"tag_ids": [1, 0]}, "tag_ids: every item must be an integer >= 1"),
        ({"tag_ids": ["1"]}, "tag_ids.0"),
        ({"visible_in_list": "yes"}, "visible_in_list"),
        ({"colour": "red"}, "colour: not a writable field"),
        ([1, 2], "must hold a JSON object"),
    ],
)
def test_article_files_are_validated_before_sending(tmp_path: Path, body: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace(".", r"\.")):
        load_update(write(tmp_path, "a.json", body), "article")


def test_message_files_are_validated(tmp_path: Path) -> None:
    ok = {
        "message": {
            "name": "Hi",
            "channels": [
                {
                    "type": "sms",
                    "include_footer": False,
                    "sender": {"from_email": "a@b.c", "from_name": "Club"},
                }
            ],
        }
    }
    assert load_update(write(tmp_path, "m.json", ok), "message")["name"] == "Hi"
    with pytest.raises(ConfigError, match="sending: not a writable field"):
        load_update(write(tmp_path, "m2.json", {"sending": {}}), "message")
    with pytest.raises(ConfigError, match=r"channels\.0\.sender: may not be null"):
        load_update(
            write(tmp_path, "m3.json", {"channels": [{"type": "sms", "sender": None}]}),
            "message",
        )


def cfg(tmp_path: Path, emu: Emulator) -> str:
    return management_config(tmp_path, emu, bearer_token_env="T_MGMT", locales=["en", "de"])


async def test_article_update_dry_run_404_and_422(emulator: Emulator, tmp_path: Path) -> None:
    c = cfg(tmp_path, emulator)
    f = str(
        write(
            tmp_path,
            "a.json",
            {"article": {"status": "unpublished", "title": {"en": "New", "de": "Neu"}}},
        )
    )
    rc, out, err = await sync(
        emulator, "articles", "update", "3", "--file", f, "--dry-run", "--config", c
    )
    assert rc == 0, err
    assert "dry run" in out and "unpublished" in out
    assert emulator.management.articles[3]["status"] == "published"  # nothing persisted
    rc, out, err = await sync(
        emulator, "articles", "update", "3", "--file", f, "--json", "--config", c
    )
    assert rc == 0 and json.loads(out)["title"]["de"] == "Neu"
    assert emulator.management.articles[3]["status"] == "unpublished"
    rc, _, err = await sync(emulator, "articles", "update", "999", "--file", f, "--config", c)
    assert rc == 1 and "Record not found" in err
    cats = str(write(tmp_path, "b.json", {"category_ids": [1, 5]}))
    rc, _, err = await sync(emulator, "articles", "update", "4", "--file", cats, "--config", c)
    assert rc == 0, err
    assert emulator.management.articles[4]["category_ids"] == [1, 5]
    refused = str(write(tmp_path, "c.json", {"id": 4}))
    rc, _, err = await sync(emulator, "articles", "update", "4", "--file", refused, "--config", c)
    assert rc == 2 and "id is read-only" in err


async def test_422_prints_every_detail(emulator: Emulator, tmp_path: Path) -> None:
    settings = parse_config(
        {
            "upstream": {"base_url": emulator.base_url, "email": "a@b.c", "password": "x"},
            "management": mgmt(emulator, product="unknown-product"),
        }
    )
    assert settings.management is not None
    from sync.core.errors import InvalidParametersError

    async with ManagementClient(settings.management) as client:
        with pytest.raises(InvalidParametersError) as info:
            await client.update_article(1, {"status": "draft"})
    assert "Invalid parameters" in str(info.value) and "X-Product-Name" in str(info.value)


async def test_message_update(emulator: Emulator, tmp_path: Path) -> None:
    c = cfg(tmp_path, emulator)
    f = str(write(tmp_path, "m.json", {"message": {"name": "Spring sale", "shorten_urls": True}}))
    rc, out, err = await sync(
        emulator, "messages", "update", "sms", "2", "--file", f, "--archived", "true", "--config", c
    )
    assert rc == 0, err
    assert "Spring sale" in out
    msg = emulator.management.messages[("sms", 2)]
    assert msg["name"] == "Spring sale" and msg["shorten_urls"] is True and msg["archived_at"]
    rc, _, err = await sync(emulator, "messages", "update", "sms", "99", "--file", f, "--config", c)
    assert rc == 1 and "Record not found" in err


async def test_backfill_mirrors_press_releases_when_configured(
    emulator: Emulator, tmp_path: Path
) -> None:
    c = cfg(tmp_path, emulator)
    rc, out, err = await sync(emulator, "backfill", "--quiet", "--config", c)
    assert rc == 0, err
    assert "mgmt_press_releases" in out
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("select count(*) from mgmt_press_releases").fetchone()[0] == 2 * len(
        emulator.management.press
    )
    conn.close()


async def test_unconfigured_management_is_a_clear_error(emulator: Emulator, tmp_path: Path) -> None:
    p = tmp_path / "plain.toml"
    p.write_text(f'[upstream]\nbase_url = "{emulator.base_url}"\nemail = "a@b.c"\npassword = "x"\n')
    f = str(write(tmp_path, "a.json", {"status": "draft"}))
    rc, _, err = await sync(emulator, "articles", "update", "1", "--file", f, "--config", str(p))
    assert rc == 2 and "[management] is not configured" in err


async def test_cli_shows_every_detail_of_a_422(emulator: Emulator, tmp_path: Path) -> None:
    c = cfg(tmp_path, emulator)
    text = Path(c).read_text().replace('product = "loyalty"', 'product = "unknown-product"')
    Path(c).write_text(text)
    f = str(write(tmp_path, "a.json", {"status": "draft"}))
    rc, _, err = await sync(emulator, "articles", "update", "1", "--file", f, "--config", c)
    assert rc == 1 and "Invalid parameters" in err and "X-Product-Name" in err


# -- article fields as the spec's table has them -------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"prototype_id": 7}, "prototype_id: can only be unset (null)"),
        ({"status": None}, "status: may not be null"),
        ({"visible_in_list": None}, "visible_in_list: may not be null"),
        ({"external_master": None}, "external_master: may not be null"),
        ({"category_ids": None}, "category_ids: may not be null"),
        ({"visible_since": "tomorrow"}, "visible_since: 'tomorrow' is not an RFC 3339 date-time"),
        ({"published_at": "2026-13-01T00:00:00Z"}, "published_at: '2026-13-01T00:00:00Z' is not"),
        ({"topic_relevant_until": "2026-05-01T09:00:00"}, "topic_relevant_until: '2026-05-01T"),
        ({"visible_until": "2026-05-01"}, "visible_until: '2026-05-01' is not"),
    ],
)
def test_article_nullability_prototype_and_date_times_checked_before_sending(
    tmp_path: Path, body: Any, needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_update(write(tmp_path, "a.json", body), "article")
    assert needle in str(info.value)


def test_what_the_spec_allows_passes(tmp_path: Path) -> None:
    ok = {
        "prototype_id": None,
        "visible_since": "2026-05-01T09:00:00.000Z",
        "visible_until": "2026-06-01T09:00:00+02:00",
        "topic_relevant_until": None,
        "published_at": None,
        "locales": None,
        "tag_ids": None,
        "title": {"en": "T", "de": None},
        "external_master": "",
        "category_ids": [],
    }
    assert load_update(write(tmp_path, "a.json", ok), "article") == ok


async def test_the_client_refuses_before_sending(emulator: Emulator) -> None:
    from sync.core.errors import InvalidParametersError

    settings = parse_config(
        {
            "upstream": {"base_url": emulator.base_url, "email": "a@b.c", "password": "x"},
            "management": mgmt(emulator),
        }
    )
    assert settings.management is not None
    before = dict(emulator.management.articles[2])
    async with ManagementClient(settings.management) as client:
        with pytest.raises(InvalidParametersError) as info:
            await client.update_article(
                2, {"prototype_id": 9, "status": None, "visible_since": "soon", "url": "/x"}
            )
    assert info.value.url is None  # never sent
    assert set(info.value.details) == {"prototype_id", "status", "visible_since", "url"}
    assert emulator.management.articles[2] == before


async def put(emu: Emulator, path: str, body: Any) -> tuple[int, Any]:
    import aiohttp

    headers = {
        "Authorization": f"Bearer {emu.management.token}",
        "X-User-Agent": "t",
        "X-Product-Name": "loyalty",
        "X-Loyalty-Club-Slug": "demo-club",
    }
    async with (
        aiohttp.ClientSession() as http,
        http.put(f"{emu.base_url}{path}", json=body, headers=headers) as r,
    ):
        return r.status, await r.json()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prototype_id": 4}, "prototype_id"),
        ({"status": None}, "status"),
        ({"visible_in_list": None}, "visible_in_list"),
        ({"external_master": None}, "external_master"),
        ({"category_ids": None}, "category_ids"),
        ({"visible_since": "next week"}, "visible_since"),
        ({"published_at": "2026-02-30T00:00:00Z"}, "published_at"),
        ({"topic_relevant_until": 1767225600}, "topic_relevant_until"),
        ({"locales": "en"}, "locales"),
        ({"title": {"en": 5}}, "title"),
    ],
)
async def test_the_emulator_refuses_what_the_article_table_forbids(
    emulator: Emulator, change: dict[str, Any], field: str
) -> None:
    status, doc = await put(emulator, "/v1/content/management/articles/3", {"article": change})
    assert status == 422 and doc["error"] == "Invalid parameters"
    assert list(doc["details"]) == [field] and isinstance(doc["details"][field], list)


async def test_the_emulator_derives_publication_status(emulator: Emulator) -> None:
    path = "/v1/content/management/articles/3"
    cases = [
        ({"status": "draft"}, "draft"),
        ({"status": "unpublished"}, "draft"),
        ({"status": "published", "visible_since": "2099-01-01T00:00:00.000Z"}, "scheduled"),
        ({"visible_since": None, "visible_until": "2001-01-01T00:00:00Z"}, "expired"),
        ({"visible_until": "2099-01-01T00:00:00+01:00", "prototype_id": None}, "published"),
    ]
    for change, expected in cases:
        status, doc = await put(emulator, path, {"article": change})
        assert status == 200, doc
        assert doc["article"]["publication_status"] == expected, change
    assert emulator.management.articles[3]["publication_status"] == "published"


async def test_a_message_update_keeps_each_channels_template(emulator: Emulator) -> None:
    template = emulator.management.messages[("sms", 4)]["channels"][0]["template"]
    channel = {
        "type": "sms",
        "include_footer": False,
        "sender": {"from_email": "new@example.com", "from_name": "New"},
    }
    status, doc = await put(emulator, "/v1/messages/sms/4", {"message": {"channels": [channel]}})
    assert status == 200
    (served,) = doc["message"]["channels"]
    assert served["template"] == template and served["sender"]["from_name"] == "New"
    assert emulator.management.messages[("sms", 4)]["channels"][0]["template"] == template
    status, doc = await put(
        emulator,
        "/v1/messages/sms/4",
        {"message": {"channels": [{**channel, "template": {"id": 1}}]}},
    )
    assert status == 422 and "channels[0].template" in doc["details"]
