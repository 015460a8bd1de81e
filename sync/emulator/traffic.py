"""What the emulator served: requests counted per route pattern and per second.

Benchmarks and users' own tests read it to see what a client costs the upstream (issue #17):
`Emulator.requests` in Python, `GET /_emulator/requests` over HTTP (JSON; `DELETE` resets it).
A route is its pattern, ids replaced (`/malls/{id}/stores`), so the counts stay few whatever the
ids; requests that match no route count under `(no route)`. The emulator's own `/_emulator/`
routes are not counted.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Any

NO_ROUTE = "(no route)"
#: Seconds of per-second counts kept (the oldest dropped first).
SECONDS_KEPT = 3600


class Traffic:
    """Requests served: in all, per route pattern, and per second (per route too)."""

    def __init__(self) -> None:
        self.total = 0
        self.routes: Counter[str] = Counter()
        self._seconds: OrderedDict[int, Counter[str]] = OrderedDict()

    def count(self, route: str, now: float) -> None:
        self.total += 1
        self.routes[route] += 1
        second = int(now)
        counts = self._seconds.get(second)
        if counts is None:
            counts = self._seconds[second] = Counter()
            while len(self._seconds) > SECONDS_KEPT:
                self._seconds.popitem(last=False)
        counts[route] += 1

    def per_second(self, route: str | None = None) -> dict[int, int]:
        """Requests in each second (Unix time) that saw any, for one route or all."""
        return {
            s: (c[route] if route is not None else c.total())
            for s, c in self._seconds.items()
            if route is None or c[route]
        }

    def peak(self, route: str | None = None) -> int:
        """The most requests served within one second."""
        return max(self.per_second(route).values(), default=0)

    def reset(self) -> None:
        self.total = 0
        self.routes.clear()
        self._seconds.clear()

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "routes": dict(sorted(self.routes.items())),
            "seconds": [
                {"second": s, "total": c.total(), "routes": dict(sorted(c.items()))}
                for s, c in self._seconds.items()
            ],
        }
