"""The PostgreSQL mirror's store, beside the SQLite one (issue #49): so far its guarded page
write (`pagewrite`) with the checked connection (`connect`), the links (`links`) and memberships (`memberships`) it writes, the
active/standby lock (`lock`), the bookkeeping tables (`bookkeeping`), the change feed with its
wake-ups (`changes`), deletions with their tombstones (`deletions`), one type's reads (`reads`,
over the schema's introspection, `schema`) with the listing diff (`listing`), the backfill
checkpoints (`backfills`), per-type status (`status`), misfit values (`values`),
`meta.scripts` (`scripts`) and sideloads (`sideloads`), and the daemon's parts: the durable
webhook queue (`queue`), the proof's book and records (`proof`), the press releases (`press`), a
mall's hours (`hours`) and the mall-level operations (`malls`); tested against a real server but
not yet wired into `Mirror`, the daemon, the configuration or the commands.

This is the only place `sync` imports psycopg (the `postgres` extra): nothing imports this
package unless it writes into PostgreSQL, so an SQLite user installs and loads none of it.
"""

from sync.store.pg.lock import ActiveLock
from sync.store.pg.pagewrite import PageWriter

__all__ = ["ActiveLock", "PageWriter"]
