"""Which mirror a command or the daemon opens: an SQLite file or a PostgreSQL schema.

`[mirror] path` (the default, `mirror.db`) names an SQLite file; `[mirror] url =
"postgresql://..."` a PostgreSQL database, with `[mirror] schema` (default `ccsync`) the schema
the mirror's tables live in (issue #49). The read-only commands take either through `--mirror`:
a path, or a URL starting `postgresql://` or `postgres://`. A `MirrorTarget` is that choice as
a value, here in the core because the configuration hands it out (`MirrorSettings.target`);
`sync.store.opening.open_mirror` opens it. Its `describe()` never shows a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

#: The URL schemes libpq takes for a connection URI.
SCHEMES = ("postgresql://", "postgres://")
#: `[mirror] schema`'s default.
DEFAULT_SCHEMA = "ccsync"
#: What `[mirror] schema` may be: a plain lowercase SQL identifier, which PostgreSQL keeps as
#: written (quoted or not) and within its 63 bytes, so every tool names it the same way.
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_url(text: str) -> bool:
    """Whether `text` names a PostgreSQL database (a libpq connection URI), not a file."""
    return text.strip().lower().startswith(SCHEMES)


def masked(url: str) -> str:
    """`url` with its password, if any, replaced by `***` (in the authority and in a
    `password=` query parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, sep, _ = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if sep else netloc
    query = "&".join(
        "password=***" if q.lower().startswith("password=") else q
        for q in parts.query.split("&")
        if q
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@dataclass(frozen=True, slots=True)
class MirrorTarget:
    """An SQLite file (`path`) or a PostgreSQL database (`url`) and the `schema` in it."""

    path: Path | None = None
    url: str | None = None
    schema: str = DEFAULT_SCHEMA

    def __post_init__(self) -> None:
        if (self.path is None) == (self.url is None):
            raise ValueError("a mirror target is a path or a url, exactly one")

    @classmethod
    def parse(cls, text: str | Path, *, schema: str = DEFAULT_SCHEMA) -> MirrorTarget:
        """`--mirror`'s value: a `postgresql://` URL, else a file's path."""
        if isinstance(text, str) and is_url(text):
            return cls(url=text.strip(), schema=schema)
        return cls(path=Path(text))

    @property
    def is_postgres(self) -> bool:
        return self.url is not None

    def describe(self) -> str:
        """The path, or the URL with its password masked, and the schema."""
        if self.url is None:
            return str(self.path)
        return f"{masked(self.url)} (schema {self.schema})"

    def __repr__(self) -> str:  # never the password
        return f"MirrorTarget({self.describe()!r})"
