"""The mirror store: every SQL statement `sync` runs lives in this package.

`Mirror` (content tables, links, hours, bookkeeping), `Listing` (the reconcile diff) and
`ChangeQueue` (the durable webhook queue, in `store.queue`). Rows arrive staged by the page
pipeline; the store binds them and never stages them itself.

May import: model, core, pipeline.
"""

from sync.store.bookkeeping import BackfillState, PageCheckpoint, TypeStatus
from sync.store.listing import Listing
from sync.store.mirror import Mirror, WriteResult

__all__ = ["BackfillState", "Listing", "Mirror", "PageCheckpoint", "TypeStatus", "WriteResult"]
