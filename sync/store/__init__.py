"""The mirror store: every SQL statement `sync` runs on the mirror lives in this package.

`Mirror` (`store.mirror`) owns the connection, writes pages, and hands out one table handle per
type (`Mirror.table`, `store.table`: reads, deletions, memberships, links) and the parts it
holds, each a module owning its SQL: meta and cursors (`meta`), backfill checkpoints
(`backfills`), runs (`runs`), the daemon's jobs (`jobrecords`), per-type status (`status`),
misfit values (`values`), the change feed (`changes`), the end phase's indexes (`indexes`,
full-text in `fts` and `ftsbuild`), group commit (`groupcommit`), hours (`hours`) and mall-level
operations (`malls`). Below them: the file and its pragmas (`file`), the schema (`schema`) and
its migrations (`migrations`), the guarded page write (`pagewrite`), the verify's compare
(`repair`), deletions and tombstones (`deletions`), links (`links`), memberships
(`memberships`), sideloads (`sideloads`) and reads (`reads`). Beside it:
`Listing` (the reconcile diff), `proof` (the rolling proof's listing pages and records),
`ChangeQueue` (the durable webhook queue, `store.queue`),
`PressReleases` (`store.press`) and the storage watch (`watch`, `faults`, `lock`). Rows arrive
staged by the page pipeline; the store binds them and never stages them itself. The layers above
hold a `MirrorStore` (`store.seam`, its parts' protocols in `store.seamparts`): what they use of a
mirror, which `Mirror` and the PostgreSQL store (`store.pg`) implement.

May import: model, core, pipeline.
"""

from sync.store.backfills import BackfillState, PageCheckpoint
from sync.store.listing import Listing
from sync.store.mirror import Mirror
from sync.store.pagewrite import WriteResult
from sync.store.seam import ListingPart, MirrorStore, TablePart
from sync.store.status import TypeStatus
from sync.store.table import TypeTable

__all__ = [
    "BackfillState",
    "Listing",
    "ListingPart",
    "Mirror",
    "MirrorStore",
    "PageCheckpoint",
    "TablePart",
    "TypeStatus",
    "TypeTable",
    "WriteResult",
]
