"""Several accounts, one mirror (#33): an upstream that issues one account per channel fills one
mirror. Each type is read by an account whose channels allow it, learned from the 403s and kept
with the upstream profile; `ccsync status` says which account reads which type; each webhook
topic is subscribed once, whichever accounts there are; the request budget is shared by the
accounts or given to each, as configured."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from sync.channel.client import ChannelClient
from sync.cli import main
from sync.core.config import Settings, parse_config
from sync.emulator import Emulator
from sync.ingest.subscriptions import Subscriptions
from sync.jobs.backfilling.backfill import Backfill
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.compare import compare

TYPES = ["malls", "deals", "events", "stores", "articles", "products"]
DEALS = ("deals@example.com", "deals-password")


async def _add_account(emu: Emulator, email: str, password: str, channels: list[str]) -> None:
    """A second account of the upstream, made as the spec makes one: POST /accounts."""
    body = {
        "data": {
            "type": "accounts",
            "attributes": {
                "email": email,
                "password": password,
                "properties": {"channels": channels},
            },
        }
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{emu.base_url}/accounts",
            data=json.dumps(body),
            headers={"Content-Type": "application/vnd.api+json"},  # JSON:API's body type
        ) as resp:
            assert resp.status == 201, await resp.text()


def _settings(emu: Emulator, db: Path, **upstream: Any) -> Settings:
    return parse_config(
        {
            "upstream": {
                "base_url": emu.base_url,
                "accounts": [
                    {"email": emu.email, "password": emu.password},
                    {"email": DEALS[0], "password": DEALS[1]},
                ],
                "types": TYPES,
                "max_backoff": 0.05,
                **upstream,
            },
            "mirror": {"path": str(db)},
            "webhooks": {
                "enabled": True,
                "public_url": "http://127.0.0.1:9",
                "secret": "s" * 20,
                "topics": TYPES,
            },
        }
    )


@pytest.mark.parametrize("budget", ["shared", "per_account"])
async def test_one_account_per_channel_fills_one_mirror(
    make_emulator: Any, tmp_path: Path, budget: str
) -> None:
    # The demo account reads the mall channel only; the second one the others.
    async with make_emulator(resources=400, seed=5, channels=["mall"]) as emu:
        await _add_account(emu, *DEALS, ["deal", "store", "editorial", "product"])
        db = tmp_path / "m.db"
        settings = _settings(emu, db, budget=budget)
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                report = await Backfill(client, mirror, settings).run()
        finally:
            mirror.close()
        assert {n: t.error for n, t in report.types.items() if t.error} == {}
        diff = compare(db, emu, TYPES)
        assert diff.differences == 0, diff.summary()

        r = CliRunner().invoke(main, ["status", "--json", "--mirror", str(db)])
        assert r.exit_code == 0, r.output
        readers = json.loads(r.stdout)["accounts"]
        assert readers["events"] == emu.email
        assert readers["deals"] == DEALS[0]
        assert readers["articles"] == DEALS[0]
        assert readers["malls"] in (emu.email, DEALS[0])  # channel ALL: either may
        text = CliRunner().invoke(main, ["status", "--mirror", str(db)])
        assert f"deals           read by {DEALS[0]}" in text.stdout


async def test_each_webhook_topic_is_subscribed_once_across_the_accounts(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=200, seed=5, channels=["mall"]) as emu:
        await _add_account(emu, *DEALS, ["deal", "store", "editorial", "product"])
        settings = _settings(emu, tmp_path / "m.db")
        for _ in range(2):  # a second run adopts what the first made
            async with ChannelClient(settings.upstream) as client:
                await Subscriptions(
                    client, settings.webhooks, settings.upstream.mirrored_types()
                ).ensure()
        topics = Counter(h["attributes"]["topic"] for h in emu.webhooks())
        assert topics == Counter(TYPES), topics


def test_accounts_are_checked_like_the_single_account(tmp_path: Path) -> None:
    base = {"base_url": "https://upstream.invalid"}
    with pytest.raises(Exception, match="accounts"):
        parse_config({"upstream": {**base, "accounts": []}})
    with pytest.raises(Exception, match="password"):
        parse_config({"upstream": {**base, "accounts": [{"email": "a@b.c"}]}})
    with pytest.raises(Exception, match="email"):
        parse_config(
            {
                "upstream": {
                    **base,
                    "email": "x@b.c",
                    "password": "p",
                    "accounts": [{"email": "a@b.c", "password": "p"}],
                }
            }
        )
    one = parse_config({"upstream": {**base, "email": "a@b.c", "password": "p"}})
    assert [a.email for a in one.upstream.all_accounts()] == ["a@b.c"]


async def test_a_restart_reads_each_route_with_the_account_learned_before(
    make_emulator: Any, tmp_path: Path
) -> None:
    """What the 403s taught is kept in the mirror: the next process sends each route straight
    to its reader, without a 403; and it holds e-mails, never a password or a token."""
    async with make_emulator(resources=200, seed=5, channels=["mall"]) as emu:
        await _add_account(emu, *DEALS, ["deal", "store", "editorial", "product"])
        db = tmp_path / "m.db"
        settings = _settings(emu, db, types=["malls", "deals", "events"])
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                await Backfill(client, mirror, settings).run()
                assert client.session.stats.statuses[403] > 0  # learned the hard way
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                # built with the mirror as its store: what the first run learned is restored
                for name in ("deals", "events", "malls"):
                    await client.list_page(Scope(catalogue.TYPES[name]), 1)
                assert client.session.stats.statuses[403] == 0
            stored = mirror.meta.get("upstream_accounts") or ""
        finally:
            mirror.close()
        assert DEALS[0] in stored and DEALS[1] not in stored and emu.password not in stored


async def test_one_account_records_nothing(make_emulator: Any, tmp_path: Path) -> None:
    """With one account there is nothing to choose: nothing is learned or stored."""
    async with make_emulator(resources=100, seed=5) as emu:
        db = tmp_path / "m.db"
        await backfill(emu, db, types=["malls", "deals"])
        mirror = Mirror.open(db, readonly=True)
        try:
            assert mirror.meta.get("upstream_accounts") is None
        finally:
            mirror.close()
        r = CliRunner().invoke(main, ["status", "--json", "--mirror", str(db)])
        assert json.loads(r.stdout)["accounts"] == {}


async def test_per_account_budgets_are_recorded_and_shown_each(tmp_path: Path) -> None:
    """With `budget = "per_account"` each account has its own request budget: the daemon records
    every one (`record_budget`) and `ccsync status` shows a line per account."""
    from sync.daemon.runs import record_budget

    settings = parse_config(
        {
            "upstream": {
                "base_url": "https://upstream.invalid",
                "accounts": [
                    {"email": "a@example.com", "password": "a"},
                    {"email": "b@example.com", "password": "b"},
                ],
                "budget": "per_account",
                "max_requests_per_second": 7,
            },
            "mirror": {"path": str(tmp_path / "m.db")},
        }
    )
    async with ChannelClient(settings.upstream) as client:
        budgets = client.session.accounts.budgets()
        assert len(budgets) == 2
        mirror = Mirror.open(settings.mirror.path)
        record_budget(mirror, budgets)
        mirror.close()
    r = CliRunner().invoke(main, ["status", "--mirror", str(settings.mirror.path)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "request budget: 7/s, now 7.0/s" in lines
    assert "  account 1: 7/s, now 7.0/s" in lines and "  account 2: 7/s, now 7.0/s" in lines


async def test_an_upstream_that_answers_404_for_a_channel_not_permitted_fills_one_mirror(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The spec does not show the status of "channel not permitted": an upstream answering 404
    (`forbidden_as_not_found`) must not make a mall look gone to the account that may not read
    its deals, stores or products. The other account is asked, reads it, and becomes its
    reader; every row and membership is mirrored, and no mall is dropped."""
    from sync.emulator.hard import Hard

    hard = Hard(forbidden_as_not_found=True)
    async with make_emulator(resources=400, seed=5, channels=["mall"], hard=hard) as emu:
        await _add_account(emu, *DEALS, ["deal", "store", "editorial", "product"])
        db = tmp_path / "m.db"
        settings = _settings(emu, db)
        mirror = Mirror.open(db)
        try:
            async with ChannelClient(settings.upstream, store=mirror.meta) as client:
                report = await Backfill(client, mirror, settings).run()
        finally:
            mirror.close()
        assert {n: t.error for n, t in report.types.items() if t.error} == {}
        diff = compare(db, emu, TYPES)
        assert diff.differences == 0, diff.summary()
        r = CliRunner().invoke(main, ["status", "--json", "--mirror", str(db)])
        readers = json.loads(r.stdout)["accounts"]
        assert readers["stores"] == DEALS[0] and readers["events"] == emu.email
