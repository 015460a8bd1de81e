"""Migrations: the named steps that bring a mirror written by an older sync up to this one.

Modelled on sqlite-utils' `migrations.py`: each migration is a named function, registered in
order with `@migration(name)`, and `apply` runs them in that order when a writer opens an
existing file (`Mirror.open`). Unlike sqlite-utils, no table records which have run: the mirror's
schema stays exactly as an older sync left it to read (no new bookkeeping table), so every step
looks at the file and does nothing when there is nothing to do, which costs a few catalogue
lookups on an up-to-date mirror. The order matters: types and foreign keys are repaired before
the tables that derive from them, and the indexes come last.
"""

from __future__ import annotations

from collections.abc import Callable

from sync.model import catalogue
from sync.store import fts, indexes, memberships, runs
from sync.store.ftsbuild import remove_scratch
from sync.store.links import link_tables
from sync.store.opened import OpenMirror
from sync.store.schema import PYTYPE, Schema, declared_type, foreign_keys, link_sql
from sync.store.scripts import migrate_scripts
from sync.store.transaction import write_transaction

Step = Callable[[OpenMirror], None]

#: (name, step) in the order `apply` runs them.
MIGRATIONS: list[tuple[str, Step]] = []


def migration(name: str) -> Callable[[Step], Step]:
    """Register the decorated function as the next step, under `name`."""

    def register(step: Step) -> Step:
        MIGRATIONS.append((name, step))
        return step

    return register


def apply(mirror: OpenMirror) -> None:
    """Run every step, in order, on an existing mirror opened for writing."""
    for _name, step in MIGRATIONS:
        step(mirror)


def _content_tables(mirror: OpenMirror) -> list[str]:
    return [t for t in catalogue.TYPES if mirror.schema.has_table(t)]


@migration("declared_column_types")
def declared_column_types(mirror: OpenMirror) -> None:
    """Give columns the type the spec declares (a first page of nulls once made
    `social_feeds.is_active` TEXT), converting the stored values in place."""
    schema = mirror.schema
    for table in _content_tables(mirror):
        change = {
            c: PYTYPE[want]
            for c, a in schema.types(table).items()
            if (want := declared_type(table, c)) is not None and a != want
        }
        if change:
            schema.transform(table, change, "the spec declares another type")


@migration("foreign_keys")
def declare_foreign_keys(mirror: OpenMirror) -> None:
    """Declare the foreign keys older tables lack: content tables through sqlite-utils'
    `transform`, link tables rebuilt in one savepoint. A table that has them is left."""
    schema = mirror.schema
    for table in [*catalogue.TYPES, catalogue.HOURS_TABLE, catalogue.CURRENT_HOURS_TABLE]:
        cols = schema.columns(table)
        if not cols:
            continue
        have = {fk.column for fk in schema.db.table(table).foreign_keys}
        missing = [
            fk
            for fk in foreign_keys(table)
            if fk[0] in cols and fk[0] not in have and "id" in schema.columns(fk[1])
        ]
        if missing:
            schema.drop_views()
            searched = schema.fts_table(table)
            schema.db.table(table).transform(add_foreign_keys=missing)
            schema.forget(table)
            if searched:  # the rebuilt table lost the triggers that keep its index in step
                schema.ensure_fts([table], replace=True)
    for table, owner_col, related_col, owner, target in link_tables():
        if schema.columns(table) and not list(
            mirror.conn.execute(f"PRAGMA foreign_key_list([{table}])")
        ):
            _rebuild_link_table(schema, table, owner_col, related_col, owner, target)
    schema.ensure_views()


def _rebuild_link_table(
    schema: Schema, table: str, owner_col: str, related_col: str, owner: str, target: str
) -> None:
    """A link table rebuilt with its foreign keys declared, rows kept, in one savepoint."""
    conn = schema.conn
    schema.drop_views()
    conn.execute("SAVEPOINT sync_fk")
    try:
        conn.execute(f"ALTER TABLE [{table}] RENAME TO [{table}_old_fk]")
        conn.execute(link_sql(table, owner_col, related_col, owner, target))
        conn.execute(f"INSERT INTO [{table}] SELECT * FROM [{table}_old_fk]")
        conn.execute(f"DROP TABLE [{table}_old_fk]")
        conn.execute("RELEASE sync_fk")
    except BaseException:
        conn.execute("ROLLBACK TO sync_fk")
        conn.execute("RELEASE sync_fk")
        raise
    schema.forget(table)
    schema.create_link_index(table, related_col)


@migration("memberships")
def mall_memberships(mirror: OpenMirror) -> None:
    """Each mall-scoped row's `mall_id` becomes its first membership (`sync.store.memberships`)."""
    memberships.migrate(mirror.conn, lambda name: memberships.ensure(mirror.schema, name))


@migration("scripts_per_position")
def scripts_per_position(mirror: OpenMirror) -> None:
    """`meta_scripts` keyed by resource type and position (`sync.store.scripts`)."""
    migrate_scripts(mirror.conn)


@migration("run_records")
def run_records(mirror: OpenMirror) -> None:
    """`_sync_runs` gets each run's pid and last sign of life (`sync.store.runs`)."""
    runs.add_columns(mirror.conn)


@migration("unfinished_end_phase")
def unfinished_end_phase(mirror: OpenMirror) -> None:
    """An end phase killed part way (`indexes.END_PHASE` still set): its scratch file goes, and
    every full-text index is checked against its table. Whatever the marker, an index left
    without its triggers (or triggers without their index) is rebuilt."""
    unfinished = mirror.meta.get(indexes.END_PHASE) is not None
    if unfinished:
        remove_scratch(mirror.path)
    tables = _content_tables(mirror)
    fts.repair(mirror.conn, {t: mirror.schema.columns(t) for t in tables}, check=unfinished)


@migration("tombstone_source")
def tombstone_source(mirror: OpenMirror) -> None:
    """Tombstones say who wrote them (`source`; only the deletions feed writes them now,
    `sync.store.deletions`). An older sync also tombstoned rows it only inferred gone, at a
    moment of its own clock, and cannot tell which were which: its tombstones are dropped,
    so none keeps out a row the upstream lists again. They guard a race of seconds (a page
    fetched before a deletion, written after it) that no restart carries over; the feed's own
    overlap writes the newest again."""
    cols = {r[1] for r in mirror.conn.execute("PRAGMA table_info(_sync_tombstones)")}
    if "source" in cols:
        return
    with write_transaction(mirror.conn):
        mirror.conn.execute("ALTER TABLE _sync_tombstones ADD COLUMN source TEXT")
        mirror.conn.execute("DELETE FROM _sync_tombstones WHERE source IS NULL")


@migration("indexes")
def missing_indexes(mirror: OpenMirror) -> None:
    """A bulk load interrupted before its indexes were built: they are built now."""
    indexes.create(mirror)
