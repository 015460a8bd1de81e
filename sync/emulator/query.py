"""JSON:API query features of the emulator: filters, sort, paging, sparse fieldsets, include.

`parse` turns the query string into a `Query` (raising `QueryError` -> 400 for anything invalid)
and `Selector.select` evaluates it against the rows to an ordered id list (cached per query and
data version, so page after page of one listing costs a slice). Writing the selected rows is
`sync.emulator.render`'s.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sync.emulator.records import Rec
from sync.emulator.rows import Rows
from sync.emulator.spec import MODELLED, RELATIONSHIPS, TARGET
from sync.emulator.stamps import micro

#: The stamps kept below the served millisecond under `Hard.micro_stamps`.
MICRO_FIELDS = frozenset({"updated_at", "created_at"})

DATE_OPS = ("lt", "lte", "gt", "gte")


class QueryError(ValueError):
    """A query parameter the emulator rejects with 400."""

    def __init__(self, message: str, parameter: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def comparable(value: str) -> str:
    """Both date formats and both timestamp styles as one sortable text."""
    v = value.strip().rstrip("Z").replace(" ", "T")
    if len(v) == 10:
        return v + "T00:00:00.000"
    if len(v) == 19:
        return v + ".000"
    return v


def _valid_date(value: str) -> bool:
    v = comparable(value)
    return len(v) == 23 and v[4] == "-" and v[7] == "-" and v[10] == "T" and v[:4].isdigit()


@dataclass(frozen=True)
class Query:
    """A parsed collection query (paging kept apart so the selection can be cached)."""

    ids: frozenset[int] | None
    dates: tuple[tuple[str, str, str], ...]  # (field, op, comparable value)
    equals: tuple[tuple[str, frozenset[str]], ...]  # (attribute, accepted values)
    term: str | None
    sort: tuple[tuple[str, bool], ...]  # (attribute, descending)
    include: tuple[str, ...]
    fields: tuple[tuple[str, tuple[str, ...]], ...]
    size: int
    number: int

    def key(self) -> tuple[Any, ...]:
        return (self.ids, self.dates, self.equals, self.term, self.sort)

    def fields_for(self, type_name: str) -> tuple[str, ...] | None:
        for t, f in self.fields:
            if t == type_name:
                return f
        return None


def _int(params: Mapping[str, str], name: str, default: int, low: int, high: int | None) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise QueryError(f"{name} must be an integer", name) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise QueryError(f"{name} must be {bound}", name)
    return value


def parse(
    type_name: str,
    params: Mapping[str, str],
    *,
    date_fields: frozenset[str],
    equal_filters: frozenset[str],
    default_equals: Mapping[str, str] | None = None,
    page_bound: int = 0,
    refuse_above: bool = False,
) -> Query:
    """Parse a collection query for `type_name`; QueryError for anything off. `page_bound`
    (`Hard.page_bound`; 0: the spec's 100) is the largest page served: a larger `page[size]` is
    served that many rows, or refused when `refuse_above`."""
    ids: frozenset[int] | None = None
    dates: list[tuple[str, str, str]] = []
    equals: dict[str, frozenset[str]] = {
        k: frozenset(v.split(",")) for k, v in (default_equals or {}).items()
    }
    term: str | None = None
    fields: list[tuple[str, tuple[str, ...]]] = []
    for name, value in params.items():
        if name.startswith("auth_") or name in (
            "page[size]",
            "page[number]",
            "sort",
            "include",
            "from",
            "to",
            "lat",
            "long",
        ):
            continue
        if name == "filter[id]":
            try:
                ids = frozenset(int(x) for x in value.split(",") if x.strip())
            except ValueError:
                raise QueryError(
                    "filter[id] takes a comma-separated list of integer ids", name
                ) from None
        elif name == "filter":
            term = value.lower()
        elif name.startswith("filter[") and name.endswith("]"):
            inner = name[7:-1]
            if "][" in inner:
                fld, op = inner.split("][", 1)
                if fld not in date_fields or op not in DATE_OPS:
                    raise QueryError(f"unknown date filter {name}", name)
                if not _valid_date(value):
                    raise QueryError(f"{name}: use YYYY-MM-DD or YYYY-MM-DDTHH:mm:ss.SSSZ", name)
                dates.append((fld, op, comparable(value)))
            elif inner in equal_filters:
                equals[inner] = frozenset(v.strip() for v in value.split(","))
            else:
                raise QueryError(f"unknown filter {name}", name)
        elif name.startswith("fields[") and name.endswith("]"):
            fields.append((name[7:-1], tuple(f for f in value.split(",") if f)))
        else:
            raise QueryError(f"unknown query parameter {name}", name)
    sort: list[tuple[str, bool]] = []
    for part in (params.get("sort") or "id").split(","):
        part = part.strip()
        if not part:
            continue
        sort.append((part.lstrip("-"), part.startswith("-")))
    include = tuple(i for i in (params.get("include") or "").split(",") if i)
    for path in include:
        owner = type_name
        for name in path.split("."):
            if name not in RELATIONSHIPS.get(owner, ()):
                raise QueryError(f"{path}: {name} is not a relationship of {owner}", "include")
            if name not in MODELLED.get(owner, ()):
                raise QueryError(f"{path}: {name} of {owner} cannot be included", "include")
            owner = TARGET.get(name, name)
    return Query(
        ids,
        tuple(sorted(dates)),
        tuple(sorted(equals.items())),
        term,
        tuple(sort),
        include,
        tuple(sorted(fields)),
        _page_size(params, page_bound, refuse_above),
        _int(params, "page[number]", 1, 1, None),
    )


def _page_size(params: Mapping[str, str], bound: int, refuse_above: bool) -> int:
    if not bound:
        return _int(params, "page[size]", 25, 1, 100)
    if refuse_above:
        return min(_int(params, "page[size]", 25, 1, bound), bound)  # the default 25 is clamped
    return min(_int(params, "page[size]", 25, 1, None), bound)


def without_linkage(
    type_name: str, include: tuple[str, ...], hidden: frozenset[tuple[str, str]]
) -> tuple[str, ...]:
    """`include` with every path cut where it reaches a relationship (owner, name) in `hidden`
    (served links only: `Hard.no_include_linkage`, `Hard.route_memberships`,
    `Hard.deals_without_stores`): `stores` and `stores.images` of malls go, `malls.stores` of
    articles becomes `malls`."""
    out: list[str] = []
    for path in include:
        owner, kept = type_name, []
        for name in path.split("."):
            if (owner, name) in hidden:
                break
            kept.append(name)
            owner = TARGET.get(name, name)
        if kept:
            out.append(".".join(kept))
    return tuple(dict.fromkeys(out))


class Selector:
    """Evaluates queries to ordered id lists, caching per (scope, query, data version): at most
    `size` lists holding at most `budget` ids in all (a list of every deal at 5,000,000
    resources holds 750,000)."""

    def __init__(self, data: Rows, size: int = 128, budget: int = 4_000_000) -> None:
        self.data = data
        self.cache: OrderedDict[tuple[Any, ...], list[int]] = OrderedDict()
        self.size = size
        self.budget = budget
        self.held = 0

    def select(self, type_name: str, mall: int | None, q: Query) -> list[int]:
        # A mall's deals depend on stores and malls too (`Rows.mall_deals`).
        version = self.data.generation if mall is not None and type_name == "deals" else None
        fine = type_name if self.data.hard.micro_stamps else None
        key = (type_name, mall, self.data.version[type_name], version, q.key(), fine)
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
            return hit
        recs = self.data.by_type[type_name]
        base = self.data.ids(type_name, mall)
        ids = sorted(q.ids & set(base)) if q.ids is not None else base
        if q.dates or q.equals or q.term:
            ids = [i for i in ids if _matches(recs[i], q, fine)]
        for attr, desc in reversed(q.sort):
            if attr == "id":
                if desc:
                    ids = list(reversed(ids))
                continue

            def by_attr(i: int, a: str = attr) -> tuple[int, Any]:
                return _sort_key(recs[i].get(a))

            ids = sorted(ids, key=by_attr, reverse=desc)
        if ids is base:
            ids = list(base)
        self.cache[key] = ids
        self.held += len(ids)
        while len(self.cache) > self.size or (self.held > self.budget and len(self.cache) > 1):
            _, old = self.cache.popitem(last=False)
            self.held -= len(old)
        return ids


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, "")
    if isinstance(value, bool | int | float):
        return (1, float(value))
    return (2, str(value))


def _matches(rec: Rec, q: Query, fine: str | None = None) -> bool:
    """Whether `rec` passes `q`'s filters; `fine` (the type, under `Hard.micro_stamps`):
    absolute stamps compared with the microseconds they stand for."""
    get = rec.get  # the hot attributes cost no decode (see `records.HOT`)
    for fld, op, bound in q.dates:
        raw = get(fld)
        if not isinstance(raw, str):
            return False
        v = comparable(raw)
        value = bound
        if fine is not None and fld in MICRO_FIELDS:
            v, value = v + micro(fine, raw), bound + "000"
        if not (
            (op == "lt" and v < value)
            or (op == "lte" and v <= value)
            or (op == "gt" and v > value)
            or (op == "gte" and v >= value)
        ):
            return False
    for attr, accepted in q.equals:
        raw = get(attr)
        text = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if text not in accepted:
            return False
    if q.term:
        a = rec.decoded()
        hay = " ".join(str(a.get(k, "")) for k in ("name", "title", "description", "headline"))
        if q.term not in hay.lower():
            return False
    return True
