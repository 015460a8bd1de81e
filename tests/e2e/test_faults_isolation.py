"""Faults stay in their type (#31): one route answering badly delays only that route's work.

The daemon follows the emulator while aioresponses answers `/articles` (its listings and its
`filter[id]` fetches) with a hostile body; every other request passes through to the emulator.
Changes to contacts, deals, events and job listings must land meanwhile, through webhook
notices (the queue worker) and through polls, while articles retry, back off and are reported
per type; once the fault is lifted, articles converge too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aioresponses import aioresponses
from yarl import URL

from sync.core.config import Settings
from sync.core.errors import BadResponseError, ForbiddenError
from sync.emulator import Emulator
from sync.jobs.typefaults import record_type
from sync.pipeline.encoding import id_or_none, parse_id
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.compare import compare
from tests.support.daemon import running
from tests.support.mirror_rows import query, row
from tests.support.settings import daemon_settings
from tests.support.waiting import eventually

TYPES = ["malls", "articles", "contacts", "deals", "events", "job_listings"]
OTHERS = ["contacts", "deals", "events", "job_listings"]

_LISTING = orjson.dumps(
    {
        "data": [
            {"type": "articles", "id": str(i), "attributes": {"title": f"article {i}"}}
            for i in range(1, 30)
        ],
        "meta": {"total": 29},
        "links": {"last": "?page[number]=1"},
    }
)
#: The hostile answers of `/articles`, all with status 200: (body, content type).
HOSTILE: dict[str, tuple[bytes, str]] = {
    "html_error_page": (
        b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
        b"<body><h1>Bad Gateway</h1><p>The proxy got no answer.</p></body></html>",
        "text/html",
    ),
    "body_cut_in_half": (_LISTING[: len(_LISTING) // 2], "application/vnd.api+json"),
    "data_object_not_list": (
        orjson.dumps({"data": {"type": "articles", "id": "1", "attributes": {}}}),
        "application/vnd.api+json",
    ),
    "invalid_utf8": (
        b'{"data": [{"type": "articles", "id": "1", "attributes": {"title": "\xff\xfe\xc3"}}]}',
        "application/vnd.api+json",
    ),
}


def settings_for(emu: Emulator, db: Path, *, webhooks: bool) -> Settings:
    # With webhooks the notices carry the changes; without, a poll every 0.3 s.
    return daemon_settings(
        emu,
        db,
        webhooks=webhooks,
        upstream={"types": TYPES, "retry_budget": 2.0},
        poll_interval=3600.0 if webhooks else 0.3,
    )


@contextmanager
def hostile_articles(emu: Emulator, fault: str) -> Iterator[aioresponses]:
    """`/articles` (listings and fetches by id) answers the `fault` body with status 200;
    everything else, the emulator's webhook deliveries included, passes through."""
    body, content_type = HOSTILE[fault]
    route = re.compile(re.escape(emu.base_url) + r"/articles(\?.*)?$")
    with aioresponses(passthrough_unmatched=True) as mocked:
        mocked.get(route, status=200, body=body, content_type=content_type, repeat=True)
        yield mocked


def calls(mocked: aioresponses, path: str) -> int:
    return sum(len(v) for (_, url), v in mocked.requests.items() if URL(str(url)).path == path)


def type_errors(db: Path) -> dict[str, str | None]:
    return {r[0]: r[1] for r in query(db, "select type, last_error from _sync_types")}


def change_every_type(emu: Emulator, stamp: str) -> dict[str, str]:
    """Update one row of articles and of each other type upstream; type -> id."""
    changed = {}
    for name in ["articles", *OTHERS]:
        rid = emu.ids(name)[0]
        field = "name" if name == "contacts" else "title"
        emu.update(name, rid, {field: f"{stamp} {name}"})
        changed[name] = rid
    return changed


def landed(db: Path, name: str, rid: str, stamp: str) -> bool:
    r: dict[str, Any] = row(db, name, rid) or {}
    return f"{stamp} {name}" in (r.get("name"), r.get("title"))


@pytest.mark.parametrize("fault", sorted(HOSTILE))
@pytest.mark.parametrize("path", ["webhooks", "polls"])
async def test_a_bad_route_delays_only_its_own_type(
    emulator: Emulator, tmp_path: Path, fault: str, path: str
) -> None:
    """Other types' changes land while `/articles` answers a hostile body; articles retry with
    backoff, are reported per type (status, metric), and converge once the fault is lifted."""
    db = tmp_path / "m.db"
    settings = settings_for(emulator, db, webhooks=path == "webhooks")
    async with running(settings) as daemon:
        daemon.type_faults.base, daemon.type_faults.cap = 0.05, 0.4  # short waits, same rule
        with hostile_articles(emulator, fault) as mocked:
            changed = change_every_type(emulator, "during the fault")
            # Bounded wait for a condition; with head-of-line blocking it is never reached.
            for name in OTHERS:
                await eventually(lambda n=name: landed(db, n, changed[n], "during the fault"))
            await eventually(lambda: calls(mocked, "/articles") >= 3)  # it retried
            assert not landed(db, "articles", changed["articles"], "during the fault")
            # Reported per type: `ccsync status` (last_error), /healthz and the metrics.
            await eventually(lambda: bool(type_errors(db).get("articles")))
            status = {t["type"]: t for t in status_data(settings.mirror.path)["types"]}
            assert "articles" in (status["articles"]["last_error"] or "")
            assert all(not status[n]["last_error"] for n in OTHERS)
            health = daemon.health()
            assert any(p.startswith("articles failing") for p in health["problems"])
            metrics = daemon.metrics.render()[0].decode()
            assert re.search(r'sync_type_errors_total\{type="articles"\} [1-9]', metrics)
            assert re.search(r'sync_type_failures\{type="articles"\} [1-9]', metrics)
            assert 'sync_type_errors_total{type="deals"}' not in metrics
        # The fault lifted: articles converge too, and the report clears.
        await eventually(lambda: landed(db, "articles", changed["articles"], "during the fault"))
        await eventually(lambda: compare(db, emulator, TYPES).differences == 0)
        await eventually(lambda: "articles" not in daemon.type_faults.failing)
        metrics = daemon.metrics.render()[0].decode()
        assert 'sync_type_failures{type="articles"} 0.0' in metrics


def test_a_types_outcome_is_recorded_in_one_place_with_one_wording(tmp_path: Path) -> None:
    """`record_type` is the one writer of a type's outcome: a 403 in the skipped wording
    (`ccsync status`, a backfill's report), any other error as its text, then a success that
    clears it; it returns the line it recorded."""
    mirror = Mirror.open(tmp_path / "m.db")
    forbidden = ForbiddenError("channel closed", status=403)
    line = record_type(mirror, "deals", forbidden, at=1_767_225_600.0)
    assert line == "not readable by this account (403); skipped: channel closed"
    assert record_type(mirror, "events", "mass delete refused", at=1_767_225_600.0)
    status = {s.type_name: s.as_dict() for s in mirror.types.lines()}
    assert status["deals"]["last_error"] == line
    assert status["events"]["last_error"] == "mass delete refused"
    assert record_type(mirror, "deals", None, at=1_767_225_601.0) is None
    deals = {s.type_name: s.as_dict() for s in mirror.types.lines()}["deals"]
    assert deals["last_error"] is None and deals["last_sync_at"] == "2026-01-01T00:00:01.000Z"
    mirror.close()


def test_an_id_is_read_by_one_function_strict_where_it_decides() -> None:
    """`parse_id` (deciding what to fetch or delete) refuses an id that is no integer as an
    off-spec answer; `id_or_none` (staging a page) skips it; both read the same ids alike."""
    assert parse_id("42") == id_or_none("42") == 42
    assert id_or_none("x1") is None and id_or_none(None) is None
    with pytest.raises(BadResponseError, match="'x1' is not an integer"):
        parse_id("x1")
