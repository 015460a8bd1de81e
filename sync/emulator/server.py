"""The emulator as a thing you run: in-process for tests (`Emulator.serve`) or from the CLI.

`Emulator` bundles the data set, the accounts (with the demo account), the webhook dispatcher
and the fault switches, and exposes the mutation API tests and the demo use.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
from aiohttp import web

from sync.emulator import churn
from sync.emulator.app import EmulatorApp
from sync.emulator.auth import ALL_CHANNELS, Accounts
from sync.emulator.dataset import Dataset
from sync.emulator.faults import Faults
from sync.emulator.hard import Hard
from sync.emulator.management import Management
from sync.emulator.pagecache import PageCache
from sync.emulator.render import resource_obj
from sync.emulator.routes import make_app
from sync.emulator.traffic import Traffic
from sync.emulator.webhooks import Dispatcher
from sync.model.stamps import iso_ms

#: Peak memory a resource takes while the emulator builds and serves its data set, with a margin
#: (bench/emulator_speed.py measured 1,327 MB peak at 1,000,000 resources, ~1.2 KB a resource
#: beyond the base: README, Benchmarks), and what the process takes besides.
BYTES_PER_RESOURCE = 1_500
BASE_BYTES = 150 * 2**20


def footprint(resources: int, cache_mb: int = 0) -> int:
    """Bytes an emulator serving `resources` is expected to peak at, `cache_mb` of caches
    included (their budgets: the encoding LRU's and the page cache's)."""
    return BASE_BYTES + resources * BYTES_PER_RESOURCE + cache_mb * 2**20


def max_resources(available: int, cache_mb: int = 0) -> int:
    """The largest data set whose `footprint` fits in `available` bytes."""
    return max(0, (available - BASE_BYTES - cache_mb * 2**20) // BYTES_PER_RESOURCE)


def available_memory() -> int | None:
    """Bytes of memory available to a new process (Linux `MemAvailable`), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Emulator:
    """A served (or servable) emulator of the Channel Content API."""

    def __init__(
        self,
        resources: int = 500,
        seed: int = 1,
        email: str = "demo@example.com",
        password: str = "demo-password",
        channels: Sequence[str] | None = None,
        *,
        webhook_window: float = 0.05,
        webhook_retry_interval: float = 0.2,
        page_cache_mb: int = 0,
        malls: int | None = None,
        encoding_cache_mb: int | None = None,
        profile: str | None = None,
        hard: Hard | None = None,
    ) -> None:
        """`profile="strict"` turns every hard reading on (`Hard.strict()`); `hard` gives the
        switches one by one (the object is kept: `emu.hard`). Both: the profile, then `hard`'s
        switches that are on."""
        switches = Hard.profile(profile)
        if hard is not None:
            if profile is None:
                switches = hard
            else:
                switches.update({k: getattr(hard, k) for k in hard.on()})
        self.faults = Faults(seed=seed)
        self.data = Dataset(resources, seed, clock=self.now, malls=malls, hard=switches)
        if encoding_cache_mb is not None:
            self.data.encodings.budget = encoding_cache_mb * 2**20
        self.accounts = Accounts(self.now)
        chans = frozenset(channels) | {"ALL"} if channels is not None else ALL_CHANNELS
        self.accounts.create(email, password, channels=chans, stamp=iso_ms(self.now()))
        self.email, self.password = email, password
        self.dispatcher = Dispatcher(
            self.faults,
            window=webhook_window,
            retry_interval=webhook_retry_interval,
            hard=self.data.hard,
        )
        self.data.listeners.append(self.dispatcher.notice)
        self.app = EmulatorApp(self.data, self.accounts, self.dispatcher, self.faults)
        if switches.changing_scripts:
            self.app.changing_scripts = True
        self.app.pages = PageCache(page_cache_mb * 2**20)  # `sync.emulator.pagecache`
        self.management = Management(seed, self.now)
        self.base_url = ""

    def now(self) -> float:
        return time.time() + self.faults.clock_offset

    @property
    def hard(self) -> Hard:
        """The hard readings (`sync.emulator.hard`); assign a field to switch one at run time."""
        return self.data.hard

    @property
    def requests(self) -> Traffic:
        """Requests served per route pattern and per second (`GET /_emulator/requests`)."""
        return self.app.traffic

    @contextlib.asynccontextmanager
    async def serve(self, port: int = 0, host: str = "127.0.0.1") -> AsyncIterator[str]:
        """Serve on `host:port` (a free port when 0) until the block exits."""
        runner = web.AppRunner(
            make_app(self.app, self.management), access_log=None, handle_signals=False
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        self.base_url = f"http://{host}:{bound}"
        self.app.base = self.base_url
        self.data.encodings.clear()  # cached bytes carry the base URL
        self.app.pages.clear()
        await self.dispatcher.start()
        try:
            yield self.base_url
        finally:
            await self.dispatcher.stop()
            await runner.cleanup()

    # -- the in-process API --------------------------------------------------------------------

    def force_logout(self) -> None:
        self.accounts.force_logout()

    def create(
        self,
        type_name: str,
        attributes: dict[str, Any] | None = None,
        *,
        mall_id: int | str | None = None,
    ) -> str:
        return str(
            self.data.create(
                type_name, attributes, int(mall_id) if mall_id is not None else None
            ).id
        )

    def update(
        self, type_name: str, id: int | str, attributes: dict[str, Any] | None = None
    ) -> None:
        self.data.update(type_name, int(id), attributes)

    def silent_update(
        self,
        type_name: str,
        id: int | str,
        attributes: dict[str, Any] | None = None,
        *,
        links: dict[str, Any] | None = None,
        mall_id: int | str | None = None,
    ) -> None:
        """Change content without touching `updated_at` or notifying (`Dataset.silent_update`)."""
        self.data.silent_update(
            type_name, int(id), attributes, links, int(mall_id) if mall_id is not None else None
        )

    def delete(self, type_name: str, id: int | str) -> str:
        return str(self.data.delete(type_name, int(id)).id)

    def ids(
        self, type_name: str, *, mall_id: int | str | None = None, visibility: str | None = None
    ) -> list[str]:
        ids = self.data.ids(type_name, int(mall_id) if mall_id is not None else None)
        recs = self.data.by_type[type_name]
        return [
            str(i) for i in ids if visibility is None or recs[i].get("visibility") == visibility
        ]

    def resource(
        self, type_name: str, id: int | str, include: Sequence[str] = ()
    ) -> dict[str, Any]:
        rec = self.data.by_type[type_name][int(id)]
        return resource_obj(self.data, self.app.base, rec, tuple(include), None)

    def snapshot(self, type_name: str) -> dict[str, dict[str, Any]]:
        """The rows of `type_name` as the API serves them now (late commits due included)."""
        self.data.settle()
        return {str(i): r.decoded() for i, r in self.data.by_type[type_name].items()}

    def mall_deals(self, mall: int | str) -> list[int]:
        """The ids `GET /malls/{mall}/deals` lists (every visibility)."""
        return list(self.data.ids("deals", int(mall)))

    def malls_of(self, type_name: str, id: int | str) -> list[int]:
        """The malls whose routes list the row (`Dataset.malls_of`)."""
        return self.data.malls_of(type_name, int(id))

    def move(self, type_name: str, id: int | str, from_mall: int | str, to_mall: int | str) -> None:
        """Move a mall-scoped row between malls silently (`Dataset.move`)."""
        self.data.move(type_name, int(id), int(from_mall), int(to_mall))

    def mall_of(self, type_name: str, id: int | str) -> str | None:
        mall = self.data.by_type[type_name][int(id)].mall
        return None if mall is None else str(mall)

    def scripts(self, type_name: str) -> list[Any]:
        """The `meta.scripts` responses of `type_name` carry now."""
        return list(orjson.loads(self.app.scripts_of(type_name)))

    def set_scripts(self, type_name: str, scripts: list[Any]) -> None:
        """Serve `scripts` as `type_name`'s `meta.scripts` from now on (`EmulatorApp.set_scripts`)."""
        self.app.set_scripts(type_name, scripts)

    def webhooks(self) -> list[dict[str, Any]]:
        return [
            {
                "id": str(s.id),
                "type": "webhooks",
                "attributes": {"callback_url": s.callback_url, "topic": s.topic},
            }
            for s in self.dispatcher.subs.values()
        ]

    def notice_burst(self, type_name: str, count: int) -> int:
        """Queue `count` update notices of `type_name`'s rows (in turn) for every subscription
        to it; with `hard.huge_notice_batches` each gets them as one delivery. How many
        subscriptions got them (`POST /_emulator/notices`)."""
        ids = sorted(self.data.by_type[type_name])
        return self.dispatcher.burst(type_name, ids, count) if ids else 0

    def unsubscribe_all(self) -> int:
        n = len(self.dispatcher.subs)
        self.dispatcher.subs.clear()
        return n

    def mutate_randomly(self, n: int, rng_seed: int) -> list[tuple[str, str, str]]:
        return churn.mutate_randomly(self.data, n, rng_seed)


async def serve_forever(
    emu: Emulator, port: int, mutations_per_second: float, announce: Any
) -> None:
    """Serve until SIGINT/SIGTERM, applying random mutations at the given rate."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with emu.serve(port):
        announce(emu)
        rng = random.Random(emu.data.seed)
        while not stop.is_set():
            if mutations_per_second > 0:
                emu.mutate_randomly(1, rng.randrange(1 << 30))
                timeout = 1.0 / mutations_per_second
            else:
                timeout = 3600.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout)
