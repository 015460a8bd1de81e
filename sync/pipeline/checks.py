"""Checks of a page's values against what the spec declares, before anything is written.

Two kinds of value are held to their declaration as a page is staged (`sync.pipeline.staging`):

- **Timestamps.** The absolute stamps (`sync.model.stamps.ABSOLUTE`) are stored in the one
  canonical form the mirror compares as text; a stamp in another ISO form is normalised, one that
  cannot be read refuses its resource (`check_stamps`).
- **Declared numbers and booleans** (`sync.model.columns.VALUE_KINDS`). A value converted
  losslessly (`coerce`: `"7"` for an integer) is written converted and noted; a resource with a
  value that does not fit is left out (`check_values`).

A refused resource is not written: the mirror keeps its last good copy, and the writer logs and
records the refusal (`_sync_refusals`, the value clipped by `clip`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from sync.model.columns import ValueKind
from sync.model.stamps import ABSOLUTE, CANONICAL, StampError
from sync.model.stamps import normalize as normalize_stamp
from sync.pipeline.batches import Staged
from sync.pipeline.encoding import INT64_MAX, INT64_MIN, dumps

ABSOLUTE_STAMPS = tuple(sorted(ABSOLUTE))
#: The Python types (as parsed from JSON) each kind of declared attribute takes as it is.
_FITS: dict[ValueKind, frozenset[type]] = {
    "boolean": frozenset({bool, type(None)}),
    "integer": frozenset({int, type(None)}),
    "number": frozenset({int, float, type(None)}),
}
_SPEC_NAME = {"boolean": "a boolean", "integer": "an integer", "number": "a number"}
_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
#: Characters of a refused value kept for the log line and `_sync_refusals`.
VALUE_CHARS = 80
#: A resource refused: (id, attribute, value clipped, problem).
Refusal = tuple[int, str, str, str]


def check_stamps(rid: int, attrs: dict[str, Any], extra: dict[str, Any]) -> Refusal | None:
    """Put into `extra` the absolute stamps of `attrs` that are not in the canonical form,
    normalised; the refusal when one cannot be read (then `extra` is not to be used). Runs on
    every resource: a canonical stamp costs one match."""
    for k in ABSOLUTE_STAMPS:
        v = attrs.get(k)
        if v is None or (type(v) is str and CANONICAL.fullmatch(v)):
            continue
        try:
            if not isinstance(v, str):
                raise StampError(f"{str(v)[:60]!r} is not a timestamp string")
            extra[k] = normalize_stamp(v)
        except StampError as exc:
            return (rid, k, clip(v), str(exc))
    return None


def check_values(
    b: Staged, docs: list[dict[str, Any]], kinds: dict[str, ValueKind], keys: dict[str, None]
) -> list[dict[str, Any]]:
    """Hold each declared number and boolean attribute of the batch to its kind: a value
    converted losslessly (`coerce`) is written converted and noted in `b.coerced`; a resource
    with a value that does not fit is left out (`b.refused`; the mirror keeps its last good
    copy), and the documents of those kept are returned.

    The hot path: one set of the value types per declared column and page (~3 us), so a
    well-typed page costs next to nothing; only a column holding a misfit is looked at value
    by value."""
    wanted: list[bool] | None = None
    for column, kind in kinds.items():
        if column not in keys:
            continue
        fits = _FITS[kind]
        pos = b.columns.index(column) + 1
        if {type(d.get(column)) for d in docs} <= fits and (
            kind != "integer" or float not in {type(r[pos]) for r in b.rows}  # beyond 64 bits
        ):
            continue
        for j, doc in enumerate(docs):
            raw = doc.get(column)
            if type(raw) in fits and (type(raw) is not int or INT64_MIN <= raw <= INT64_MAX):
                continue
            rid = b.ids[j]
            value = coerce(kind, raw)
            if value is None:
                if wanted is None:
                    wanted = [True] * len(docs)
                wanted[j] = False
                problem = f"{describe(raw)} where the spec declares {_SPEC_NAME[kind]}"
                b.refused.append((rid, column, clip(raw), problem))
            else:
                row = b.rows[j]
                b.rows[j] = (*row[:pos], value, *row[pos + 1 :])
                b.coerced.append((rid, column, clip(raw)))
    if wanted is None:
        return docs
    b.keep(wanted)
    return [d for d, w in zip(docs, wanted, strict=True) if w]


def coerce(kind: ValueKind, raw: Any) -> int | float | None:
    """`raw` as the `kind` it was declared, when that is lossless and unambiguous (the value
    reads back as sent), else None: `"7"` and `7.0` for an integer; `"true"`, `"false"`, 0 and
    1 for a boolean; `"10.5"` for a number. Not `"07"`, `"7.50"`, `"yes"`, `true` for a number,
    an integer beyond SQLite's 64 bits, nor any object or array."""
    t = type(raw)
    if kind == "boolean":
        if t is str and raw in ("true", "false"):
            return int(raw == "true")
        if t is int and raw in (0, 1):
            return int(raw)
        return None
    if t is str and _INTEGER_TEXT.fullmatch(raw):
        number = int(raw)
        return number if INT64_MIN <= number <= INT64_MAX else None
    if kind == "integer":
        if t is float and raw.is_integer() and INT64_MIN <= raw <= INT64_MAX:
            return int(raw)
        return None
    if t is str:
        try:
            number_f = float(raw)
        except ValueError:
            return None
        return number_f if math.isfinite(number_f) and repr(number_f) == raw else None
    return None


def describe(raw: Any) -> str:
    """How a refused value is described: its JSON kind."""
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, int):
        return "an integer beyond 64 bits" if not INT64_MIN <= raw <= INT64_MAX else "an integer"
    if isinstance(raw, float):
        return "a number with a fraction" if math.isfinite(raw) else "a non-finite number"
    if isinstance(raw, str):
        return "text"
    if isinstance(raw, dict):
        return "an object"
    if isinstance(raw, list):
        return "an array"
    return type(raw).__name__


def clip(raw: Any) -> str:
    """A value as a log line and `_sync_refusals` show it: its JSON, at most `VALUE_CHARS`."""
    text = dumps(raw).decode("utf-8", "replace")
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."
