"""Where the rolling proof stands (`sync.jobs.proving.proof`): a value, kept after each page as
`proof_position` in `_sync_meta` (`Mirror.proof`), so a restart resumes there.

Its stored form is the JSON object the proof always kept: `to_json` writes the keys set (an
optional one only once set), `from_json` reads one back, an older file's too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(slots=True)
class Position:
    """The unit (`unit`, its `index` in the cycle), the scope and page within it, and the
    cycle's start; per type, its entry while the cycle is in it (`types`: `started`,
    `unresolved`, `why`); the mall-scoped types the walk of `/malls` pages listed (`walked`),
    and whether the page asked was promised by the one before it (`promised`)."""

    unit: str | None = None
    index: int = 0
    scope: int = 0
    page: int = 1
    started_at: str | None = None
    types: dict[str, dict[str, Any]] | None = None
    walked: list[str] | None = None
    promised: bool | None = None

    def next_unit(self, unit: str, index: int) -> Position:
        """The position at the first page of the unit `unit` (`index`), all else kept."""
        return replace(self, unit=unit, index=index, scope=0, page=1)

    def to_json(self) -> dict[str, Any]:
        """The stored form: every key set (the optional ones, `started_at` to `promised`,
        only once set)."""
        out: dict[str, Any] = {
            "unit": self.unit,
            "index": self.index,
            "scope": self.scope,
            "page": self.page,
        }
        optional = {
            "started_at": self.started_at,
            "types": self.types,
            "walked": self.walked,
            "promised": self.promised,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> Position | None:
        """The position kept (None: none kept)."""
        if value is None:
            return None
        types = value.get("types")
        walked = value.get("walked")
        promised = value.get("promised")
        return cls(
            unit=value.get("unit"),
            index=int(value.get("index", 0)),
            scope=int(value.get("scope", 0)),
            page=int(value.get("page", 1)),
            started_at=value.get("started_at"),
            types=types if isinstance(types, dict) else None,
            walked=list(walked) if walked is not None else None,
            promised=bool(promised) if promised is not None else None,
        )
