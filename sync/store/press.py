"""Press releases of the management API in the mirror: `mgmt_press_releases`, keyed (id, locale).

Localized text is stored resolved for its locale; attachments and the image as JSON; categories
in the link table `mgmt_press_releases_categories`. The list has no updated-since filter, so each
run lists everything and then removes the rows of that locale it did not see and that a page of
the listing proves gone (`sync.management.client.Walk`); an empty listing while rows exist removes
nothing (an upstream glitch must not empty the table).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

import orjson

from sync.model.stamps import now_iso
from sync.store.transaction import write_transaction

TABLE = "mgmt_press_releases"
CATEGORIES = "mgmt_press_releases_categories"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id INTEGER NOT NULL, locale TEXT NOT NULL, title TEXT, slug TEXT, teaser TEXT, body TEXT,
    headline TEXT, published_at TEXT, attachments TEXT, image TEXT, url TEXT, category_ids TEXT,
    seen_run TEXT, fetched_at TEXT, PRIMARY KEY (id, locale));
CREATE INDEX IF NOT EXISTS idx_{TABLE}_slug ON {TABLE} (slug);
CREATE TABLE IF NOT EXISTS {CATEGORIES} (
    press_release_id INTEGER NOT NULL, locale TEXT NOT NULL, category_id INTEGER NOT NULL,
    PRIMARY KEY (press_release_id, locale, category_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_{CATEGORIES}_category ON {CATEGORIES} (category_id);
"""
_TEXT = ("title", "slug", "teaser", "body", "headline", "published_at", "url")
#: The columns `release_rows` fills, in their order: the key, the text, the JSON, the run's.
COLUMNS = ("id", "locale", *_TEXT, "attachments", "image", "category_ids", "seen_run", "fetched_at")
#: The columns among `COLUMNS` holding JSON text (`sync.store.pg.press` keeps them as jsonb).
JSON_COLUMNS = ("attachments", "image", "category_ids")


def release_rows(
    locale: str, run: str, items: Sequence[dict[str, Any]], stamp: str
) -> list[tuple[Any, ...]]:
    """One page's rows of `mgmt_press_releases`, valued as `COLUMNS`: a text field that is not
    a string (nor null) as its JSON text, the attachments, image and categories as JSON."""
    rows = []
    for p in items:
        text = [
            p.get(k) if isinstance(p.get(k), str | None) else orjson.dumps(p.get(k)).decode()
            for k in _TEXT
        ]
        rows.append(
            (
                p["id"],
                locale,
                *text,
                orjson.dumps(p.get("attachments")).decode(),
                orjson.dumps(p.get("image")).decode(),
                orjson.dumps(p.get("category_ids") or []).decode(),
                run,
                stamp,
            )
        )
    return rows


def category_rows(locale: str, items: Sequence[dict[str, Any]]) -> list[tuple[Any, str, int]]:
    """One page's rows of `mgmt_press_releases_categories`: (release, locale, category) for
    each category id that is an integer."""
    return [
        (p["id"], locale, int(c))
        for p in items
        for c in (p.get("category_ids") or [])
        if isinstance(c, int)
    ]


def keeps_all(listed: int, held: int) -> bool:
    """Whether a prune must remove nothing: an empty listing (`listed`) where the locale has
    rows (`held`) is an upstream glitch until the next run says otherwise."""
    return listed == 0 and held > 0


class PressReleases:
    """Writes of one listing run per locale."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.conn.executescript(_SCHEMA)

    def write(self, locale: str, run: str, items: Sequence[dict[str, Any]]) -> int:
        """Upsert one page of one locale in one transaction; mark the rows as seen by `run`."""
        rows = release_rows(locale, run, items, now_iso())
        with write_transaction(self.conn):
            self.conn.executemany(
                f"INSERT OR REPLACE INTO {TABLE} (id, locale, title, slug, teaser, body, headline, "
                "published_at, url, attachments, image, category_ids, seen_run, fetched_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            ids = [p["id"] for p in items]
            self.conn.executemany(
                f"DELETE FROM {CATEGORIES} WHERE press_release_id = ? AND locale = ?",
                [(i, locale) for i in ids],
            )
            self.conn.executemany(
                f"INSERT OR IGNORE INTO {CATEGORIES} (press_release_id, locale, category_id) VALUES (?, ?, ?)",
                category_rows(locale, items),
            )
        return len(rows)

    def unseen(self, locale: str, run: str) -> list[int]:
        """Ids of `locale` the listing `run` did not return."""
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT id FROM {TABLE} WHERE locale = ? AND seen_run != ? ORDER BY id",
                (locale, run),
            )
        ]

    def prune(self, locale: str, run: str, listed: int, proven: Collection[int]) -> int:
        """Remove the rows of `locale` that listing `run` did not see and proved absent
        (`proven`, see `sync.management.client.Walk`); returns the number of rows removed."""
        local = self.conn.execute(
            f"SELECT count(*) FROM {TABLE} WHERE locale = ?", (locale,)
        ).fetchone()[0]
        if keeps_all(listed, local):
            return 0  # an empty listing where there were rows: keep them, the next run decides
        gone = [(i, locale, run) for i in proven]
        with write_transaction(self.conn):
            self.conn.executemany(
                f"DELETE FROM {CATEGORIES} WHERE press_release_id = ? AND locale = ? AND "
                f"NOT EXISTS (SELECT 1 FROM {TABLE} WHERE id = press_release_id "
                "AND locale = ? AND seen_run = ?)",
                [(i, loc, loc, r) for i, loc, r in gone],
            )
            removed = 0
            for row in gone:
                removed += self.conn.execute(
                    f"DELETE FROM {TABLE} WHERE id = ? AND locale = ? AND seen_run != ?", row
                ).rowcount
        return removed


class PressTables:
    """The press releases' tables as the mirror holds them (`Mirror.press`): made on first
    use, so a read-only open never makes them."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def open(self) -> PressReleases:
        """The writes of one listing run per locale (`PressReleases`), the tables made."""
        return PressReleases(self._conn)
