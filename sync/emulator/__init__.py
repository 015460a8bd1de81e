"""The bundled emulator of the Channel Content API (see README, "The emulator").

`Emulator` serves a generated, deterministic data set over real HTTP on 127.0.0.1 with the
spec's auth, JSON:API features, deletions feed and webhooks, plus switchable faults. It shares only the
spec's model with the client, so it cannot pass the client's assumptions on.

May import: model, core.
"""

from sync.emulator.faults import Faults
from sync.emulator.server import Emulator

__all__ = ["Emulator", "Faults"]
