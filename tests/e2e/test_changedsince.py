"""The missed-row signal "a row changed since the backfill started" (`sync.jobs.backfilling.changedsince`):
rows the walk read as they are prove nothing; a row changed under the walk still does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.channel.transport import Response
from sync.emulator import Emulator
from sync.jobs.proving.reconcile import Reconciler
from tests.support.backfilled import run_backfill
from tests.support.compare import compare
from tests.support.settings import make_settings


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The types the missed-row pass (a reconcile of the type's scopes) ran for."""
    passes: list[str] = []
    original = Reconciler.reconcile

    async def counting(self: Reconciler, scopes: Any, *args: Any, **kw: Any) -> Any:
        passes.append(scopes[0].rtype.name)
        return await original(self, scopes, *args, **kw)

    monkeypatch.setattr(Reconciler, "reconcile", counting)
    return passes


async def test_a_backfill_of_an_idle_upstream_runs_no_missed_row_pass(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing changes while the backfill runs: the rows stamped just before the upstream's
    newest stamp (inside the stamps' lower bound of the start) were read as they are, so no
    type gets the missed-row pass, and the mirror is exact."""
    passes = _count_passes(monkeypatch)
    db = tmp_path / "m.db"
    with capture_logs() as logs:
        await run_backfill(make_settings(emulator, db))
    assert passes == []
    assert not [e for e in logs if e["event"] == "backfill.changed_while_walked"]
    assert compare(db, emulator).differences == 0


def _change_after_page_one(emulator: Emulator, type_name: str, rid: str, attrs: Any) -> Any:
    """A client wrapper: `rid` of `type_name` changes as soon as page 1 of its listing is read."""
    pending = [rid]

    def wrap(client: ChannelClient) -> None:
        original = client.list_response

        async def list_response(listing: Any, number: int, **kw: Any) -> Response:
            resp = await original(listing, number, **kw)
            if listing.rtype.name == type_name and number == 1 and not listing.fields and pending:
                emulator.update(type_name, pending.pop(), attrs)
            return resp

        client.list_response = list_response  # type: ignore[method-assign]

    return wrap


async def test_a_row_changed_after_its_page_was_read_still_runs_the_pass(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An article updated right after its page was read is held with its old stamp: evidence."""
    passes = _count_passes(monkeypatch)
    db = tmp_path / "m.db"
    first = sorted(emulator.ids("articles"), key=int)[0]
    settings = make_settings(emulator, db, types=["articles"], page_size=10, concurrency=1)
    with capture_logs() as logs:
        await run_backfill(settings, wrap=_change_after_page_one(emulator, "articles", first, None))
    assert passes == ["articles"]
    assert [e["type"] for e in logs if e["event"] == "backfill.changed_while_walked"] == [
        "articles"
    ]
    assert compare(db, emulator, ["articles"]).differences == 0


async def test_a_deal_that_changes_listing_mid_walk_runs_the_pass_though_its_new_copy_was_read(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Public deal made Private after the Public page 1 was read leaves that listing (later
    rows shift, one may be skipped); the Private listing, read after, gives the mirror its new
    stamp. Same stamp in the mirror, yet the row moved between listings: the pass runs."""
    passes = _count_passes(monkeypatch)
    db = tmp_path / "m.db"
    public = sorted(
        (i for i, a in emulator.snapshot("deals").items() if a.get("visibility") == "Public"),
        key=int,
    )
    settings = make_settings(emulator, db, types=["deals"], page_size=5, concurrency=1)
    change = _change_after_page_one(emulator, "deals", public[0], {"visibility": "Private"})
    with capture_logs() as logs:
        await run_backfill(settings, wrap=change)
    assert "deals" in passes
    assert any(e["event"] == "backfill.changed_while_walked" for e in logs)
    assert compare(db, emulator, ["deals"]).differences == 0
