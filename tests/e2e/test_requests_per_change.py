"""Requests in proportion to changes (#47): every request has a change or a proof behind it.

Where the mall routes are the source of `malls_deals` (`deals_without_stores`), a deal edit
asks the routes once; the polls after it, served that deal again by their lookback, ask
nothing of them.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sync.channel.client import ChannelClient
from sync.daemon.bodies import Bodies
from sync.daemon.state import SyncState
from sync.emulator.hard import Hard
from sync.jobs.evidence import Evidence
from sync.jobs.incremental.poll import Poller
from sync.jobs.malls.mallroutes import MallRoutes
from sync.jobs.typefaults import TypeFaults
from sync.model import catalogue
from sync.model.scopes import scopes_of
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.compare import compare

DEALS_ROUTE = "/malls/{id}/deals"


def _bodies(settings: Any, client: ChannelClient, mirror: Mirror) -> Bodies:
    """The daemon's job bodies over a real client, mirror and poller (no scheduler)."""
    types = [catalogue.TYPES["stores"], catalogue.TYPES["deals"]]
    poller = Poller(
        client,
        mirror,
        page_size=settings.upstream.page_size,
        overlap=settings.schedule.poll_overlap,
        lookback_max=settings.schedule.poll_lookback_max,
    )
    running: Any = SimpleNamespace(
        settings=settings,
        types=types,
        client=client,
        mirror=mirror,
        evidence=Evidence(client, mirror),
        state=SyncState(types),
        faults=TypeFaults(),
        poller=poller,
        verifier=None,
        proof=None,
        members=None,
        malls=lambda: sorted(mirror.table("malls").ids()),
    )
    return Bodies(running, subscriptions=None)  # type: ignore[arg-type]


async def test_after_one_deal_edit_idle_polls_walk_no_mall_route(
    make_emulator: Any, tmp_path: Path
) -> None:
    """Before: every poll served a row (the lookback serves the edited deal again) walked every
    mall's deals route: 5 polls, 5 walks of all 40 malls. Now the edit asks each mall's route
    once (`filter[id]`), the polls after it nothing, and `malls_deals` is exact."""
    hard = Hard(deals_without_stores=True)
    async with make_emulator(resources=400, seed=23, malls=40, hard=hard) as emu:
        db = tmp_path / "m.db"
        settings = await backfill(emu, db, types=["stores", "deals"])
        mirror = Mirror.open(db)
        assert MallRoutes(None, mirror).decisions().get("deals") == "route"  # type: ignore[arg-type]
        public = emu.ids("deals", visibility="Public")
        listed = [d for d in public if emu.data.malls_of("deals", int(d))]
        emu.update("deals", listed[0], {"visibility": "Private"})  # it leaves every mall's route
        async with ChannelClient(settings.upstream, store=mirror.meta) as client:
            bodies = _bodies(settings, client, mirror)
            per_poll = []
            for _ in range(5):  # a poll a "minute": the edit, then 4 idle ones
                before = emu.requests.routes[DEALS_ROUTE]
                await bodies.poll_type(catalogue.TYPES["deals"])
                per_poll.append(emu.requests.routes[DEALS_ROUTE] - before)
            assert 0 < per_poll[0] <= 40 and per_poll[1:] == [0, 0, 0, 0], per_poll
            # A change the notice lane fetched first: the poll holds that version already, and
            # the change feed still has its malls asked, once.
            emu.update("deals", listed[1], {"visibility": "Private"})
            deals = catalogue.TYPES["deals"]
            await Evidence(client, mirror).fetch_and_write(scopes_of(deals, []), [int(listed[1])])
            before = emu.requests.routes[DEALS_ROUTE]
            await bodies.poll_type(deals)
            await bodies.poll_type(deals)
            assert 0 < emu.requests.routes[DEALS_ROUTE] - before <= 40
        mirror.close()
        c = compare(db, emu, ["stores", "deals"])
        assert c.differences == 0 and c.links_compared, c.summary()
