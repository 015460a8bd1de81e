"""The bundled emulator of the Channel Content API (see README, "The emulator").

`Emulator` serves a generated, deterministic data set over real HTTP on 127.0.0.1 with the
spec's auth, JSON:API features, deletions feed and webhooks, plus switchable faults. It shares only the
spec's model with the client, so it cannot pass the client's assumptions on.

The modules, from the ground up. What the spec says: `spec` (types, relationships, routes,
filters), `hard` (the hard readings, each a switch), `faults`, `stamps`. The data: `records` (one
compact row), `rows` (rows and their indexes), `memberships` (rows in more than one mall),
`generator` (a seed's data set), `dataset` (the data set and its mutations), `churn` (random
changes over time), `shifting` (rows leaving a listing being walked), `late` (feed entries
listed late, rows a "current" list drops for a while), `commits` (stamps behind the `Date`
clock, late commits, unstable tie order). Serving it: `query`
(parse and select), `render` and `encodings` (a resource's bytes), `pagecache`, `traffic`,
`auth` (accounts, signatures), `webhooks` (delivery), `responses`, `app` (shared state and the
steps every handler takes), `middleware`, the handlers by concern (`listings`, `hours`,
`accounts`, `subscriptions`, `admin`), `routes` (the route table), the management API
(`management`, `management_rules`, `management_data`), and `server` (`Emulator`, the thing you
run).

May import: model, core.
"""

from __future__ import annotations

from sync.emulator.faults import Faults
from sync.emulator.server import Emulator

__all__ = ["Emulator", "Faults"]
