"""The mirror store: every SQL statement `sync` runs on the mirror lives in this package.

`Mirror` (`store.mirror`) is the facade over one module per concept: the file and its pragmas
(`file`), the schema (`schema`) and its migrations (`migrations`), the end phase's indexes
(`indexes`, full-text in `fts` and `ftsbuild`), the change feed (`changes`), group commit
(`groupcommit`), the guarded page write (`pagewrite`), misfit values (`values`), deletions and
tombstones (`deletions`), links (`links`), memberships (`memberships`), sideloads
(`sideloads`), hours (`hours`), reads (`reads`) and bookkeeping (`bookkeeping`). Beside it:
`Listing` (the reconcile diff), `proof` (the rolling proof's listing pages and records),
`ChangeQueue` (the durable webhook queue, `store.queue`),
`PressReleases` (`store.press`) and the storage watch (`watch`, `faults`, `lock`). Rows arrive
staged by the page pipeline; the store binds them and never stages them itself.

May import: model, core, pipeline.
"""

from sync.store.bookkeeping import BackfillState, PageCheckpoint, TypeStatus
from sync.store.listing import Listing
from sync.store.mirror import Mirror
from sync.store.pagewrite import WriteResult

__all__ = ["BackfillState", "Listing", "Mirror", "PageCheckpoint", "TypeStatus", "WriteResult"]
