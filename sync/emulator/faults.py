"""Faults the emulator can inject, switchable per run and at runtime from tests.

Request faults apply to data routes (not to `/accounts`: creation, login, logout, unless
`Hard.account_faults`): added latency, stalls (an answer held back for `stall_seconds`, past a
client's timeout), dropped connections, 500/502/503 answers, 429 with `Retry-After`, and
listing pages served by a lagging replica (older copies of changed rows). Webhook faults (lost,
duplicated, reordered deliveries) are applied by the webhook dispatcher. A clock offset shifts
the emulator's clock for signature checks, timestamps and the `Date` header. Random draws come
from one seeded generator so a run can be replayed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Faults:
    """Fault switches; assign any field at runtime."""

    error_rate: float = 0.0
    error_statuses: tuple[int, ...] = (500, 502, 503)
    rate_429: float = 0.0
    retry_after: int = 1
    latency: float = 0.0
    stall_rate: float = 0.0
    stall_seconds: float = 5.0
    drop_rate: float = 0.0
    # A listing page answered by a lagging replica: each changed row on it as it was before its
    # last change (an older `updated_at`, older attributes and links).
    stale_rate: float = 0.0
    webhook_loss_rate: float = 0.0
    webhook_duplicate_rate: float = 0.0
    webhook_reorder: bool = False
    clock_offset: float = 0.0
    seed: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng.seed(self.seed)

    def roll(self, rate: float, kind: str) -> bool:
        """True with probability `rate`, counted under `kind` when it fires."""
        if rate > 0 and self.rng.random() < rate:
            self.injected[kind] = self.injected.get(kind, 0) + 1
            return True
        return False

    def off(self) -> None:
        """Switch every fault off (the clock offset included)."""
        self.error_rate = self.rate_429 = self.latency = self.drop_rate = self.stall_rate = 0.0
        self.stale_rate = 0.0
        self.webhook_loss_rate = self.webhook_duplicate_rate = 0.0
        self.webhook_reorder = False
        self.clock_offset = 0.0
