"""The end phase: every secondary index, full-text index, feed trigger and view, built at once.

A bulk load into empty tables defers them (`defer`): rows arrive in id order but their
`updated_at`, `seo_slug` and `mall_id` do not, and each commit would rewrite pages all over
those indexes. `create` then builds them once, sorted: the B-tree indexes in the mirror while a
thread builds the full-text indexes beside it (`sync.store.ftsbuild`), then the change feed's
triggers and the views. It is cheap when everything exists, so an open runs it too (a load
interrupted before its end phase). `END_PHASE` in `_sync_meta` marks it unfinished until it
returns: a process killed in between leaves it, and the next open then checks every full-text
index against its table (`sync.store.migrations`), too slow to do on every open. The mirror
holds an `EndPhase` (`Mirror.indexes`): a bulk load defers and ends through it (an open
builds what is missing through the migrations, `create`).
"""

from __future__ import annotations

from sync.model import catalogue
from sync.model.stamps import now_iso
from sync.store import changes, memberships
from sync.store.ftsbuild import SideBuild
from sync.store.opened import OpenMirror

#: `_sync_meta` key set while `create` runs.
END_PHASE = "end_phase_started_at"


def create(mirror: OpenMirror) -> None:
    """Build any missing index of the content and link tables, the full-text indexes, the
    feed's triggers and the views. Missing full-text indexes are built beside the mirror while
    the B-tree indexes are built in it."""
    mirror.meta.set(END_PHASE, now_iso())
    schema, conn = mirror.schema, mirror.conn
    tables = [t for t in catalogue.TYPES if mirror.schema.has_table(t)]
    plan = schema.fts_missing(tables)
    side = None
    if plan and not conn.in_transaction and mirror.path.is_file():
        # Largest first (max(rowid) as the measure: a lookup, where count(*) is a scan).
        size = {t: conn.execute(f"SELECT max(rowid) FROM [{t}]").fetchone()[0] or 0 for t in plan}
        plan = dict(sorted(plan.items(), key=lambda item: -size[item[0]]))
        side = SideBuild(mirror.path, plan, autocheckpoint=mirror.group.autocheckpoint).start()
    try:
        schema.create_indexes(tables)
        for name, rtype in catalogue.TYPES.items():
            for rel in rtype.relationships:
                table = rel.link_table(name)
                if not rel.to_one and mirror.schema.has_table(table):
                    schema.create_link_index(table, rel.link_columns(name)[1])
        for name in memberships.MEMBER_TYPES:
            if mirror.schema.has_table(memberships.table(name)):
                schema.create_link_index(memberships.table(name), memberships.columns(name)[1])
        if side is not None:
            schema.ensure_fts(side.steal())  # what the thread has not started yet
    except BaseException:
        if side is not None:
            side.finish(copy=False)
        raise
    if side is not None:
        side.finish()
    schema.ensure_fts(tables)  # what the side build did not make (or all, without it)
    schema.ensure_change_triggers(tables)
    schema.ensure_views()
    mirror.meta.set(END_PHASE, None)


def defer(mirror: OpenMirror, deferred: bool) -> None:
    """Defer the indexes and the feed's triggers (a bulk load begins), or build them (it
    ends): the feed then gets one `backfill` entry per type loaded, not one per row."""
    was = mirror.schema.defer_indexes
    mirror.schema.defer_indexes = deferred
    if deferred:
        changes.drop_triggers(mirror.conn)
        return
    if was:
        changes.note_backfill(
            mirror.conn, [t for t in catalogue.TYPES if mirror.schema.has_table(t)]
        )
    create(mirror)


class EndPhase:
    """The end phase of one open mirror (`Mirror.indexes`)."""

    def __init__(self, mirror: OpenMirror) -> None:
        self.mirror = mirror

    def defer(self, deferred: bool) -> None:
        """During a bulk load into empty tables, build secondary indexes, full-text indexes and
        the change feed's triggers at the end (`defer`)."""
        defer(self.mirror, deferred)
