"""`sync.jobs.backfilling.backfilltail`: after the pages, the related routes always, the mall routes only
for contacts or deals (a 403 there a warning), and the press releases' counts."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from sync.core.config import Settings, parse_config
from sync.core.errors import ForbiddenError
from sync.jobs.backfilling import backfilltail
from sync.jobs.press import PressResult
from sync.store import Mirror
from tests.support.jobfakes import table


def _settings(types: list[str]) -> Settings:
    return parse_config(
        {
            "upstream": {
                "base_url": "http://u.test",
                "email": "a@b.c",
                "password": "x",
                "types": types,
            }
        }
    )


class Calls:
    def __init__(self, refuse: bool = False) -> None:
        self.log: list[tuple[str, Any]] = []
        self.refuse = refuse
        calls = self

        class Related:
            def __init__(self, client: Any, mirror: Any) -> None:
                pass

            async def fill(self, types: Any) -> None:
                calls.log.append(("related", sorted(t.name for t in types)))

        class Malls:
            def __init__(self, client: Any, mirror: Any) -> None:
                pass

            async def refresh(self, names: Any, malls: Any, *, check_deals: bool) -> None:
                calls.log.append(("mall_routes", (sorted(names), malls, check_deals)))
                if calls.refuse:
                    raise ForbiddenError("403 on /malls/1/contacts", status=403, hint="grant it")

        self.related, self.malls = Related, Malls


async def test_the_mall_routes_run_only_for_contacts_or_deals(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    monkeypatch.setattr(backfilltail, "RelatedRoutes", calls.related)
    monkeypatch.setattr(backfilltail, "MallRoutes", calls.malls)
    table(mirror, "malls", [(3, None), (1, None)])
    await backfilltail.fill_linkage(None, mirror, _settings(["malls", "events"]))  # type: ignore[arg-type]
    assert calls.log == [("related", ["events", "malls"])]
    calls.log.clear()
    await backfilltail.fill_linkage(None, mirror, _settings(["malls", "deals"]))  # type: ignore[arg-type]
    assert calls.log == [
        ("related", ["deals", "malls"]),
        ("mall_routes", (["deals", "malls"], [1, 3], False)),
    ]


async def test_a_mall_route_refused_is_a_warning(
    mirror: Mirror, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(refuse=True)
    monkeypatch.setattr(backfilltail, "RelatedRoutes", calls.related)
    monkeypatch.setattr(backfilltail, "MallRoutes", calls.malls)
    table(mirror, "malls", [])
    with capture_logs() as logs:
        await backfilltail.fill_linkage(None, mirror, _settings(["contacts"]))  # type: ignore[arg-type]
    assert [(e["event"], e["hint"]) for e in logs] == [
        ("backfill.mall_routes_forbidden", "grant it")
    ]


async def test_press_releases_hands_on_rows_and_removals(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    async def press(mirror: Any, settings: Any, *, fail_fast: bool = True) -> PressResult:
        seen.append(fail_fast)
        return PressResult(rows=7, removed=2)

    monkeypatch.setattr(backfilltail, "mirror_press", press)
    assert await backfilltail.press_releases(None, None, fail_fast=False) == (7, 2)  # type: ignore[arg-type]
    assert seen == [False]
