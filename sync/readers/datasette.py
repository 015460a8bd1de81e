"""What the mirror tells the people and tools that read it: Datasette metadata.

Datasette shows every table of a file alike; this describes each table of the mirror (content
tables, link tables and the views over them, the mall memberships, hours, scripts, the
management API's press releases) as docs/schema.md does and hides the bookkeeping (`_sync_*`,
SQLite's `sqlite_sequence`; Datasette hides the full-text shadow tables itself), so a reader
sees the data and what each table means. `ccsync datasette-metadata` prints it; pass it to
`datasette mirror.db --metadata metadata.json`. Datasette reads SQLite files only: a PostgreSQL
mirror (`[mirror] url`) is refused in one line (`NOT_SQLITE`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sync.core.errors import MirrorError
from sync.core.target import MirrorTarget
from sync.model import catalogue
from sync.store import Mirror, memberships, press, proof, queue
from sync.store.schema import BOOKKEEPING, FTS_COLUMNS, VIEWS

#: Every `_sync_*` table: hidden from readers.
BOOKKEEPING_TABLES = tuple(
    re.findall(
        r"CREATE TABLE IF NOT EXISTS (_sync_\w+)",
        BOOKKEEPING + queue.SCHEMA + proof.SCHEMA_LISTING + proof.SCHEMA_SCOPES,
    )
)

#: Why a PostgreSQL mirror gets no Datasette metadata, and what to use instead.
NOT_SQLITE = (
    "Datasette reads SQLite files only, and this mirror is in PostgreSQL ({where}); "
    "browse it with a PostgreSQL client (psql, pgAdmin, Metabase), or run "
    "datasette-metadata on an SQLite mirror ([mirror] path, or --mirror FILE)"
)

#: SQLite's table of AUTOINCREMENT counters (`_sync_changes.seq`, ...): not data.
SQLITE_SEQUENCE = "sqlite_sequence"

#: How a client turns an image's `url` into one of a given size (spec: "the client replaces the
#: token in the url with <width>x<height> or <width>").
IMAGE_SIZE_SQL = "replace(url, size_parameter, '640x480')"

_VIEW_TEXT = {
    "stores_products": "The products of each store: the inverse of products_stores.",
    "stores_deals": "The deals of each store: the inverse of deals_stores.",
    "stores_job_listings": "The job listings of each store (job_listings.store_id).",
    "products_articles": "The articles of each product: the inverse of articles_products.",
    "malls_articles": "The articles of each mall: the inverse of articles_malls.",
}

#: `malls_deals`, a view derived by a rule or a table filled from the routes (docs/schema.md);
#: the same words either way, what it holds being the route's.
MALLS_DEALS_TEXT = (
    "GET /malls/{id}/deals with its default visibility (Public): the mall's local Public deals "
    "(is_local 1, a store of the deal in the mall) and every national Public deal (is_local 0) "
    "unless the mall sets exclude_national_deals. A view derived by that rule while it agrees "
    "with the routes it is checked against, else a table filled from every mall's route "
    "(`ccsync status` says which, and why)."
)
_OTHER_TEXT = {
    catalogue.HOURS_TABLE: "Opening hours per mall and date (GET /malls/{id}/hours), a rolling window.",
    catalogue.CURRENT_HOURS_TABLE: "GET /malls/{id}/current-hours, the body as served (JSON).",
    "meta_scripts": (
        "meta.scripts as last served per resource type (type), in order (position): "
        "select script_type, content from meta_scripts where type = 'deals' order by position."
    ),
    press.TABLE: "Management API v1: press releases per locale.",
    press.CATEGORIES: "Management API v1: the categories of each press release.",
}


def _content_text(rtype: catalogue.ResourceType) -> str:
    text = (
        f"Channel Content API {rtype.name}: one row per resource, one column per attribute "
        "(absolute stamps in UTC, YYYY-MM-DDTHH:MM:SS.sssZ)."
    )
    if rtype.level == "mall":
        text += (
            f" mall_id: the lowest mall that lists it (NULL when none does), a convenience: "
            f"every mall that lists it is in {memberships.table(rtype.name)}."
        )
    if not rtype.listable:
        text += " Arrives only beside the rows that link to it; unreferenced rows are pruned."
    if rtype.name == "images":
        text += (
            f" url holds a size token named by size_parameter: {IMAGE_SIZE_SQL} gives the "
            "640x480 image (or a width alone, e.g. '320')."
        )
    if rtype.name in FTS_COLUMNS:
        text += f" Full-text search (?_search=) over {', '.join(FTS_COLUMNS[rtype.name])}."
    return text


def _present(mirror_path: Path) -> set[str]:
    """The tables and views of the mirror (read-only; MirrorError when it cannot be read)."""
    mirror = Mirror.open(mirror_path, readonly=True)
    try:
        return mirror.schema.names()
    finally:
        mirror.close()


def datasette_metadata(where: Path | MirrorTarget) -> dict[str, Any]:
    """Datasette metadata for the mirror file at `where` (its database is named by the stem):
    the tables and views it holds, none it does not (`mgmt_press_releases` only with
    `[management]`, a link table once its type was mirrored). MirrorError for a PostgreSQL
    mirror (`NOT_SQLITE`)."""
    if isinstance(where, MirrorTarget):
        if where.path is None:
            raise MirrorError(NOT_SQLITE.format(where=where.describe()))
        where = where.path
    mirror_path = where
    present = _present(mirror_path)
    tables: dict[str, dict[str, Any]] = {}
    for name, rtype in catalogue.TYPES.items():
        tables[name] = {"description": _content_text(rtype)}
        for rel in rtype.relationships:
            if rel.to_one:
                continue
            owner, other = rel.link_columns(name)
            tables[rel.link_table(name)] = {
                "description": (
                    f"The {rel.name} of each of {name} ({owner} -> {rel.target}.id as "
                    f"{other}), in the order served (position)."
                )
            }
    for name in memberships.MEMBER_TYPES:
        mall, row = memberships.columns(name)
        tables[memberships.table(name)] = {
            "description": (
                f"Which malls list each of {name} (GET /malls/{{id}}/{name}): one row per "
                f"(mall, row) pair, {mall} -> malls.id, {row} -> {name}.id."
            )
        }
    for name in VIEWS:
        tables[name] = {"description": _VIEW_TEXT.get(name, "")}
    tables["malls_deals"] = {"description": MALLS_DEALS_TEXT}  # a view, or a table
    for name, text in _OTHER_TEXT.items():
        tables[name] = {"description": text}
    # Every `_sync_*` the file holds (an older or newer sync's too), and SQLite's own counter.
    for name in {*BOOKKEEPING_TABLES, *(n for n in present if n.startswith("_sync_"))}:
        tables[name] = {"hidden": True, "description": "sync's bookkeeping."}
    tables[SQLITE_SEQUENCE] = {"hidden": True, "description": "SQLite's AUTOINCREMENT counters."}
    tables = {name: meta for name, meta in tables.items() if name in present}
    return {
        "title": "sync mirror of the Channel Content API",
        "description": (
            "A local SQLite mirror kept up to date by sync. Content tables are named as their "
            "JSON:API type; link tables <type>_<relationship>; views give the inverse sides."
        ),
        "databases": {mirror_path.stem: {"tables": tables}},
    }
