"""The PostgreSQL mirror's columns: the type each attribute takes, and each staged value as the
column takes it.

Part of the page write (`sync.store.pg.pagewrite`): the
spec's declarations give a column's type (`declared`), values infer one for an attribute it
does not list (`inferred`, widened only rightwards along `WIDER`), and a staged value is
converted only where the column needs it (`CONVERT`: text, jsonb). Names PostgreSQL cannot
take as columns are left out (`usable`). `latest_copies` reduces a batch's copies of one id to
the one SQLite's row-by-row upsert would leave.

**Types.** Types come from the spec's declarations
(`sync.model.columns`): integers `bigint`, booleans `boolean` (staged as 0/1), numbers `double
precision` (SQLite's REAL, so values compare as in the SQLite mirror; `numeric` would read
10.2 back as a Decimal), strings and decimals-as-strings `text`, the spec's object and array
attributes (`JSON_ATTRIBUTES`) `jsonb`. Date fields stay `text`, `COLLATE "C"`: the absolute
stamps are normalised on staging to `YYYY-MM-DDTHH:MM:SS.sssZ` (`sync.model.stamps`), so byte
order is time order and the guard compares them exactly as SQLite's does (relative ones are kept
as served, as in SQLite); `timestamptz` can come later, with a conversion on both sides. An
attribute the spec does not list is inferred from the batch's values (`bigint`, then `double
precision`, then `text`; objects and arrays arrive as JSON text, as in SQLite) and widened the
same way when a later value does not fit (`ALTER COLUMN ... TYPE`: the table is rewritten under
an exclusive lock, as SQLite's `transform` rebuilds it); one whose values are all null is not created until one
is not. An attribute named as a system column (`xmin`) or longer than 63 bytes is not stored
(`usable`). A text value with a NUL character (PostgreSQL text cannot hold one; SQLite can) is
stored with U+FFFD in its place, and so is one inside a jsonb value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from sync.model import catalogue
from sync.model.columns import COLUMN_TYPES, KEY_COLUMNS, VALUE_KINDS
from sync.model.stamps import ABSOLUTE
from sync.pipeline.encoding import dumps

BIGINT = "bigint"
DOUBLE = "double precision"
TEXT = "text"
BOOLEAN = "boolean"
JSONB = "jsonb"
#: A date field: text compared byte by byte, as SQLite compares it.
STAMP = 'text COLLATE "C"'
#: Inferred types in widening order: a column only ever moves right.
WIDER = (BIGINT, DOUBLE, TEXT)
#: How a column is changed to a wider inferred type.
WIDEN_USING = {DOUBLE: "double precision", TEXT: "text"}

#: The attributes the spec types object or array. `sync.model.columns` declares them TEXT (the
#: SQLite mirror keeps them as JSON text); here they are `jsonb`, queryable as JSON.
JSON_ATTRIBUTES: dict[str, frozenset[str]] = {
    "stores": frozenset({"structured_hours"}),
    "programs": frozenset({"properties"}),
    "social_feeds": frozenset({"properties"}),
}

#: Names PostgreSQL keeps for its system columns: an attribute so named cannot be a column.
SYSTEM_COLUMNS = frozenset({"tableoid", "xmin", "cmin", "xmax", "cmax", "ctid", "oid"})
#: PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1): a longer one is truncated, so
#: two long attribute names could meet in one column.
MAX_NAME = 63

#: The stamp the guard compares.
UPDATED_AT = "updated_at"
#: PostgreSQL type oids the writer converts values for (others are bound as staged).
TEXT_OID = 25
JSONB_OID = 3802


def declared(table: str, column: str) -> str | None:
    """The PostgreSQL type of `column` of `table` from the spec's declarations, or None for an
    attribute the spec does not list (inferred from its values: `inferred`)."""
    affinity = COLUMN_TYPES.get(table, KEY_COLUMNS).get(column)
    if affinity is None:
        return None
    if affinity == "INTEGER":
        return BOOLEAN if VALUE_KINDS.get(table, {}).get(column) == "boolean" else BIGINT
    if affinity == "REAL":
        return DOUBLE
    if column in JSON_ATTRIBUTES.get(table, ()):
        return JSONB
    rtype = catalogue.TYPES.get(table)
    if column in ABSOLUTE or (rtype is not None and column in rtype.date_fields):
        return STAMP
    return TEXT


def usable(column: str) -> bool:
    """Whether an attribute can be a column here: not a system column's name, nor longer than
    PostgreSQL keeps. Like the names staging leaves out (`sync.pipeline.staging.safe_name`), an
    attribute that cannot be one is not stored, and the rest of its row is."""
    return column not in SYSTEM_COLUMNS and len(column.encode()) <= MAX_NAME


def inferred(values: Iterable[Any]) -> str | None:
    """The narrowest of `WIDER` that holds every value as staged, None when all are null."""
    widest = -1
    for v in values:
        if v is None:
            continue
        kind = type(v)
        rank = 0 if kind is int or kind is bool else 1 if kind is float else 2
        if rank > widest:
            widest = rank
            if rank == 2:
                break
    return WIDER[widest] if widest >= 0 else None


@dataclass(frozen=True)
class Column:
    """A column as the server has it: its type's oid (the elements of the array bound for it),
    its name, and the oid of the array of that type (the parameter's type)."""

    oid: int
    type: str
    array_oid: int = 0


#: The types of a text column's values written as they are (no NUL in any string).
PLAIN_TEXT = frozenset({str, type(None)})


def _as_is(text: Any) -> Any:
    """The `dumps` of a jsonb value already serialised."""
    return text


def _no_nul(value: Any) -> Any:
    """`value` (parsed JSON) with every NUL character of its strings, keys too, as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nul(v) for v in value]
    return value


def _json_text(text: str) -> bool:
    """Whether `text` is the JSON text of an object or array (as staging encodes them)."""
    if text[:1] not in ("{", "["):
        return False
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # an integer beyond 64 bits: orjson refuses it, the standard library reads it
            parsed = json.loads(text)
        except ValueError:
            return False
    return isinstance(parsed, dict | list)


def to_text(value: Any) -> str:
    """A staged value for a text column: a number as its text (as SQLite's TEXT affinity
    stores it), NUL as U+FFFD."""
    if type(value) is not str:
        return str(value)
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def to_jsonb(value: Any) -> Jsonb:
    """A staged value for a jsonb column. Staging encodes objects and arrays as JSON text, which
    is passed on as it is; any other value (a string, a number) is stored as a JSON scalar. A
    string that is itself valid JSON text of an object or array cannot be told from one, and is
    stored as that object or array."""
    text = value if type(value) is str and _json_text(value) else dumps(value).decode()
    if "\\u0000" in text:  # jsonb refuses NUL in its strings
        text = json.dumps(_no_nul(json.loads(text)), ensure_ascii=False, separators=(",", ":"))
    return Jsonb(text, dumps=_as_is)


def json_value(text: str) -> Jsonb:
    """JSON text (of any value, as `orjson.dumps` writes it) for a jsonb column, as it is: what
    the SQLite mirror keeps as JSON text outside the typed columns (a press release's
    attachments, a mall's current hours: `sync.store.pg.press`, `sync.store.pg.hours`), where
    `to_jsonb` takes a staged value (`null` here is the JSON null, `"s"` the string s). NUL in
    its strings becomes U+FFFD, as in `to_jsonb`."""
    if "\\u0000" in text:  # jsonb refuses NUL in its strings
        text = json.dumps(_no_nul(json.loads(text)), ensure_ascii=False, separators=(",", ":"))
    return Jsonb(text, dumps=_as_is)


#: The value conversions per column type oid; a type not named binds values as staged.
CONVERT: dict[int, Callable[[Any], Any]] = {TEXT_OID: to_text, JSONB_OID: to_jsonb}


def plain_texts(values: Iterable[Any]) -> bool:
    """Whether every value is a string without NUL, or null: text columns' values to bind as
    they are, no `to_text` call each (checked at C speed: a page's text columns at once)."""
    flat = list(values)
    return set(map(type, flat)) <= PLAIN_TEXT and "\x00" not in "".join(filter(None, flat))


def latest_copies(rows: Sequence[tuple[Any, ...]], stamp: int | None) -> list[tuple[Any, ...]]:
    """The rows in id order, one per id: of several copies, the one SQLite's row-by-row guarded
    upsert would leave (a later copy replaces an earlier one unless it is older; a missing stamp
    loses to a present one). `stamp` is the position of `updated_at` in a row, or None."""
    if len({r[0] for r in rows}) == len(rows):
        return sorted(rows, key=itemgetter(0))
    kept: dict[int, tuple[Any, ...]] = {}
    for row in rows:
        held = kept.get(row[0])
        if (
            held is None
            or stamp is None
            or held[stamp] is None
            or (row[stamp] is not None and row[stamp] >= held[stamp])
        ):
            kept[row[0]] = row
    return sorted(kept.values(), key=itemgetter(0))


def alter_columns(
    conn: psycopg.Connection[Any],
    target: sql.Identifier,
    add: Sequence[tuple[str, str]],
    widen: Sequence[tuple[str, str]],
) -> None:
    """Add the (column, type) pairs of `add` to table `target` (one statement; a column another
    writer added meanwhile is kept) and widen each of `widen` to its type along `WIDER` (the
    table is rewritten under an exclusive lock), in the caller's transaction."""
    if add:
        conn.execute(
            sql.SQL("ALTER TABLE {} {}").format(
                target,
                sql.SQL(", ").join(
                    sql.SQL("ADD COLUMN IF NOT EXISTS {} {}").format(sql.Identifier(c), sql.SQL(t))
                    for c, t in add
                ),
            ),
            prepare=False,
        )
    for column, kind in widen:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING {}::{}").format(
                target,
                sql.Identifier(column),
                sql.SQL(kind),
                sql.Identifier(column),
                sql.SQL(WIDEN_USING[kind]),
            ),
            prepare=False,
        )
