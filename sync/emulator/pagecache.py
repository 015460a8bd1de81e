"""A cache of whole collection pages, so a benchmark's emulator takes little of the machine.

The emulator assembles a collection page from cached resource bytes, but the assembly (the
page's records, its included resources, the links) still costs ~1 ms of CPU a page. On a
two-core machine that CPU is taken from the client being measured, which a real upstream, on
its own servers, never does: at 200,000 resources the emulator's share was ~2.5 s of CPU per
backfill, competing with `sync`'s two processes (see the README's Benchmarks section).

With a budget (`ccsync emulator --page-cache-mb N`; off by default) the body of every collection
page served is kept, keyed by the request's path and its query without the `auth_*`
parameters, until the budget is spent; later entries are not cached (a backfill reads pages
in order, so evicting would make every read of a larger data set miss). Authentication,
faults and ETags still apply to every request: only the body is reused. Any change to the data
set (a create, update or delete of any type: an included resource changes pages of other
types) empties the cache, so a cached page is always the page the data set would give now.
"""

from __future__ import annotations


class PageCache:
    """Collection page bodies by (path, public query), for one generation of the data set."""

    def __init__(self, budget_bytes: int = 0) -> None:
        self.budget = budget_bytes
        self.used = 0
        self.hits = 0
        self.misses = 0
        self._generation = -1
        self._pages: dict[tuple[str, str], bytes] = {}

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def get(self, key: tuple[str, str], generation: int) -> bytes | None:
        """The body cached for `key`, if the data set is still at `generation`."""
        if generation != self._generation:
            self.clear()
            self._generation = generation
        body = self._pages.get(key)
        if body is None:
            self.misses += 1
        else:
            self.hits += 1
        return body

    def put(self, key: tuple[str, str], body: bytes, generation: int) -> None:
        """Keep `body` while the budget allows; a later generation's `get` drops it."""
        if generation != self._generation or key in self._pages:
            return
        if self.used + len(body) > self.budget:
            return
        self._pages[key] = body
        self.used += len(body)

    def clear(self) -> None:
        """Forget every page (the data set changed, or the base URL in the links did)."""
        self._pages.clear()
        self.used = 0

    def __len__(self) -> int:
        return len(self._pages)
