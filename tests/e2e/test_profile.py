"""Assume nothing the spec leaves open: the upstream profile, `ccsync probe`, and the fallbacks.

Each test runs the client against the emulator's strict readings (`sync/emulator/hard.py`):
`sort` ignored where the spec row documents none, include paths refused, a lower page bound.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from sync.channel.client import ChannelClient
from sync.channel.profile import UpstreamProfile
from sync.jobs.incremental.poll import Poller
from sync.jobs.probe import probe
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.compare import compare
from tests.support.processes import run
from tests.support.settings import settings_for, upstream_keys, write_config


def _route(profile: UpstreamProfile, key: str) -> Any:
    route = profile.route(key)
    assert route is not None, key
    return route


async def test_probe_tells_the_default_emulator_from_the_strict_one(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Two different, correct profiles: each line checked."""
    async with make_emulator(resources=800, seed=2) as emu:
        default = await probe(settings_for(emu, tmp_path / "a.db"))
    async with make_emulator(resources=800, seed=2, profile="strict") as emu:
        strict = await probe(settings_for(emu, tmp_path / "b.db"))
    assert default.page_size_served is None and strict.page_size_served == 30
    assert default.signing_window == 10.0 and default.window() == "10-30 s"  # accepts < 30 s
    assert strict.signing_window == 2.0 and strict.window() == "2-5 s"  # "several seconds"
    for key in ("/articles", "/contacts", "/ifeatures", "/job-listings", "/mall-messages"):
        assert _route(default, key).sort == "honoured"
        assert _route(strict, key).sort == "ignored", key
        assert _route(strict, key).filter == "honoured", key
    for key in ("/deals", "/events", "/malls", "/malls/{id}/stores"):
        assert _route(default, key).sort == _route(strict, key).sort == "honoured", key
    assert _route(default, "/malls").includes["contacts"] == "linkage"
    assert _route(strict, "/malls").includes["contacts"] == "no linkage"
    assert _route(default, "/articles").etag == "304"
    assert not (tmp_path / "a.db").exists()  # probing writes nothing


async def test_the_probe_command_prints_a_table_and_json(
    make_emulator: Any, tmp_path: Path
) -> None:
    async with make_emulator(resources=400, seed=2, profile="strict") as emu:
        cfg = write_config(
            tmp_path / "sync.toml",
            upstream=upstream_keys(emu, "PROBE_PW"),
            mirror={"path": tmp_path / "m.db"},
        )

        async def ccsync(*args: str) -> tuple[int, str]:
            rc, out, err = await run(*args, env={"PROBE_PW": emu.password})
            assert rc == 0, err[-2000:]
            return rc, out

        table = await ccsync("probe", "--config", str(cfg))
        as_json = await ccsync("probe", "--config", str(cfg), "--json")
    assert table[0] == 0, table[1]
    line = next(x for x in table[1].splitlines() if x.startswith("/articles "))
    assert line.split()[1:4] == ["ignored", "ignored", "honoured"]
    assert "served 30" in table[1]
    assert as_json[0] == 0, as_json[1]
    data = json.loads(as_json[1])
    assert data["routes"]["/articles"]["sort"] == "ignored"


async def test_a_route_that_ignores_sort_loses_no_change_to_the_poll(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`/articles` documents no `sort`; an upstream that ignores it serves id order. The walk
    by key would jump its cursor to page 1's newest stamp and skip the rest: the poll sees the
    rows out of order, re-probes, and walks the route unsorted. Every edit lands."""
    async with make_emulator(resources=6000, seed=4) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["articles"])
        emu.hard.sort_undocumented_ignored = True
        ids = emu.ids("articles")
        assert len(ids) > 300
        for rid in reversed(ids[::2][:150]):  # the newest stamps on the lowest ids
            emu.update("articles", rid)
        mirror = Mirror.open(db)
        async with ChannelClient(settings.upstream) as client:
            poller = Poller(client, mirror, page_size=100, overlap=0.0)
            (scope,) = scopes_of(catalogue.TYPES["articles"], [])
            await poller.poll_scope(scope)
            stored = client.profile
        mirror.close()
        c = compare(db, emu, ["articles"])
        assert c.differences == 0, c.summary()
        assert stored is not None and _route(stored, "/articles").sort == "ignored"


async def test_a_backfill_against_refused_includes_exits_ok_and_says_what_is_not_mirrored(
    make_emulator: Any, tmp_path: Path
) -> None:
    """An upstream that refuses every include path except images and tags (JSON:API: 400 for
    an unsupported include): the backfill drops the refused paths, mirrors every row, takes the
    linkage of relationships the spec gives a route of their own from it (`/deals/{id}/stores`,
    `/articles/{id}/malls`, a mall's contacts from `/malls/{id}/contacts`), and the mirror's
    profile and `ccsync status` say which relationships are not mirrored."""
    async with make_emulator(resources=800, seed=6) as emu:
        emu.hard.includes_allowed = ("images", "tags")
        db = tmp_path / "m.db"
        settings = await backfill(emu, db)
        c = compare(db, emu)
        assert not any(c.missing.values()) and not any(c.extra.values()), c.summary()
        assert not any(c.stale.values()), c.summary()
        not_mirrored = {
            ("events", "mall"),
            ("products", "stores"),
            ("stores", "contacts"),
            ("stores", "groups"),
            ("stores", "social_feeds"),
        }
        stale = {(t, i.split(".")[1]) for t, ids in c.stale_links.items() for i in ids}
        assert stale <= not_mirrored, stale
        conn = sqlite3.connect(db)
        raw = conn.execute("select value from _sync_meta where key = 'upstream_profile'").fetchone()
        conn.close()
        profile = UpstreamProfile.from_json(raw[0])
        assert profile is not None
        assert _route(profile, "/deals").includes["stores"] == "refused"
        assert _route(profile, "/deals").linkage_from["stores"] == "/deals/{id}/stores"
        assert _route(profile, "/malls").linkage_from["contacts"] == "/malls/{id}/contacts"
        assert _route(profile, "/malls/{id}/stores").linkage_from["groups"] == "not mirrored"
        status = await asyncio.to_thread(status_data, settings.mirror.path)
    routes = status["upstream_profile"]["routes"]
    assert routes["/articles"]["linkage_from"]["malls"] == "/articles/{id}/malls"


async def test_a_subscription_that_timed_out_is_adopted_not_made_twice(
    make_emulator: Any, tmp_path: Path
) -> None:
    """`POST /webhooks` is not idempotent: the upstream made the subscription and the answer
    was a 502. The client looks before sending again, adopts it, and a duplicate left by an
    earlier run is removed: one subscription per topic."""
    import re

    from aioresponses import CallbackResult, aioresponses

    from sync.ingest.subscriptions import Subscriptions

    async with make_emulator(resources=300, seed=1) as emu:
        webhooks = {
            "enabled": True,
            "public_url": "http://127.0.0.1:9",
            "secret": "s" * 20,
            "topics": ["articles", "deals"],
        }
        settings = settings_for(
            emu,
            tmp_path / "m.db",
            {"webhooks": webhooks},
            types=["articles", "deals"],
            max_backoff=0.01,
        )
        account = emu.accounts.login(emu.email, emu.password)
        assert account is not None
        callback = "http://127.0.0.1:9/webhooks/" + "s" * 20
        emu.dispatcher.subscribe(account.id, callback, "deals")  # an earlier run's duplicate
        emu.dispatcher.subscribe(account.id, callback, "deals")
        posts = 0

        def made_then_failed(url: Any, **kwargs: Any) -> CallbackResult:
            nonlocal posts
            posts += 1
            attrs = kwargs["json"]["data"]["attributes"]
            emu.dispatcher.subscribe(account.id, attrs["callback_url"], attrs["topic"])
            return CallbackResult(status=502, body="bad gateway")

        with aioresponses(passthrough_unmatched=True) as m:
            m.post(re.compile(r".*/webhooks\?.*"), callback=made_then_failed, repeat=True)
            async with ChannelClient(settings.upstream) as client:
                subs = Subscriptions(client, settings.webhooks, [])
                await subs.ensure()
        assert posts == 1
        topics = sorted(h["attributes"]["topic"] for h in emu.webhooks())
        assert topics == ["articles", "deals"], topics
