"""The catalogue of Channel Content API resource types: what the mirror knows about each type.

For every type it records the route that lists it (top level, or per mall for types the spec only
lists under `/malls/{id}/...`), its date fields (for `filter[<field>][op]`), the route filters the
spec documents, the relationships the mirror sideloads with `include=`, and its channel. The
emulator serves the same spec independently; it uses this table only for names and routes.

Decisions the spec leaves open (see README, "Upstream choices"):
- Types are named by their JSON:API type (`job_listings`); paths use hyphens (`job-listings`).
- Deals default to `filter[visibility]=Public`, so the mirror lists deals once per visibility.
- Images, tags and groups have no list route; they arrive through `include=` only.
- Accounts (they carry the authentication token) and webhooks are never mirrored.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

Level = Literal["top", "mall"]


@dataclass(frozen=True)
class Relationship:
    """A relationship the mirror follows.

    `name` is the key under `relationships` (underscored); `target` is the JSON:API type of the
    related resources. To-one relationships become a `<name>_id` column on the owner's row;
    to-many ones a link table `<owner>_<name>` with columns `<owner>_id` and `<target>_id`.
    """

    name: str
    target: str
    to_one: bool = False

    @property
    def column(self) -> str:
        """The owner column holding a to-one relationship's id."""
        return f"{self.name}_id"

    def link_table(self, owner: str) -> str:
        """The link table of a to-many relationship of `owner`."""
        return f"{owner}_{self.name}"

    def link_columns(self, owner: str) -> tuple[str, str]:
        """(owner column, related column) of the link table; distinct even for self-links."""
        other = f"{self.target}_id" if self.target != owner else f"related_{self.target}_id"
        return f"{owner}_id", other


@dataclass(frozen=True)
class LinkTable:
    """The link table of one to-many relationship of one owner type, as a value: its name and
    columns are read, never worked out again by the code that writes it."""

    table: str
    owner_column: str
    related_column: str
    owner: str
    relationship: Relationship

    @property
    def target(self) -> str:
        return self.relationship.target


@dataclass(frozen=True)
class ResourceType:
    """One JSON:API resource type as the mirror lists, filters and stores it."""

    name: str
    path: str
    level: Level
    channel: str
    date_fields: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()
    relationships: tuple[Relationship, ...] = ()
    listable: bool = True
    scope_params: tuple[Mapping[str, str], ...] = field(default_factory=lambda: ({},))

    @property
    def table(self) -> str:
        """The mirror table: named as the type."""
        return self.name

    @cached_property
    def link_tables(self) -> tuple[LinkTable, ...]:
        """The link tables of this type's to-many relationships, in relationship order."""
        return tuple(
            LinkTable(rel.link_table(self.name), *rel.link_columns(self.name), self.name, rel)
            for rel in self.relationships
            if not rel.to_one
        )

    @property
    def has_updated_at(self) -> bool:
        return "updated_at" in self.date_fields

    @property
    def include(self) -> str:
        """The `include=` value for this type's listings ('' when it sideloads nothing): its
        relationships, and one level further into the sideloaded types' own relationships
        (`images.tags`, `tags.tags`), whose linkage comes only that way."""
        return ",".join(include_paths(self.relationships))

    def list_path(self, mall_id: int | str | None = None) -> str:
        """The collection path: `/deals`, or `/malls/7/stores` for mall-scoped types."""
        if self.level == "mall":
            if mall_id is None:
                raise ValueError(f"{self.name} is listed per mall; a mall id is required")
            return f"/malls/{mall_id}/{self.path}"
        return f"/{self.path}"


def include_paths(rels: Iterable[Relationship]) -> list[str]:
    """`rels`' names, each followed by the paths into a sideloaded target's relationships."""
    out: list[str] = []
    for r in rels:
        out.append(r.name)
        target = TYPES.get(r.target)
        if target is not None and not target.listable:
            out += [f"{r.name}.{r2.name}" for r2 in target.relationships]
    return out


def _r(name: str, target: str | None = None, *, one: bool = False) -> Relationship:
    return Relationship(name=name, target=target or name, to_one=one)


_STAMPS = ("created_at", "updated_at")

TYPES: dict[str, ResourceType] = {
    t.name: t
    for t in (
        ResourceType(
            "malls",
            "malls",
            "top",
            "ALL",
            _STAMPS,
            ("name", "sort_name"),
            (_r("images"), _r("contacts")),
        ),
        ResourceType(
            "articles",
            "articles",
            "top",
            "editorial",
            ("display_at", "end_at", "trending_expired_at", *_STAMPS),
            (),
            (_r("images"), _r("tags"), _r("malls"), _r("products")),
        ),
        ResourceType("contacts", "contacts", "top", "mall", _STAMPS),
        ResourceType(
            "deals",
            "deals",
            "top",
            "deal",
            ("display_at", "start_at", "end_at", *_STAMPS),
            ("visibility",),
            (_r("images"), _r("tags"), _r("stores")),
            scope_params=tuple(
                {"filter[visibility]": v} for v in ("Public", "Unlisted", "Private")
            ),
        ),
        ResourceType(
            "events",
            "events",
            "top",
            "mall",
            ("display_at", "start_at", "end_at", *_STAMPS),
            ("is_active", "is_featured"),
            (_r("images"), _r("groups"), _r("tags"), _r("mall", "malls", one=True)),
        ),
        ResourceType(
            "ifeatures",
            "ifeatures",
            "top",
            "mall",
            ("start_at", "end_at", *_STAMPS),
            (),
            (_r("mall", "malls", one=True),),
        ),
        ResourceType(
            "job_listings",
            "job-listings",
            "top",
            "mall",
            ("display_at", "end_at", *_STAMPS),
            (),
            (_r("images"), _r("store", "stores", one=True)),
        ),
        ResourceType(
            "mall_messages",
            "mall-messages",
            "top",
            "mall",
            ("start_at", "end_at", *_STAMPS),
            ("message_type",),
            (_r("mall", "malls", one=True),),
        ),
        ResourceType(
            "press_releases",
            "press-releases",
            "mall",
            "mall",
            ("display_at", *_STAMPS),
        ),
        ResourceType("programs", "programs", "mall", "mall", _STAMPS),
        ResourceType(
            "products",
            "products",
            "mall",
            "product",
            _STAMPS,
            (),
            (_r("images"), _r("tags"), _r("stores")),
        ),
        ResourceType("social_feeds", "social-feeds", "mall", "mall", _STAMPS),
        ResourceType(
            "stores",
            "stores",
            "mall",
            "store",
            ("opening_date", *_STAMPS),
            (),
            (_r("images"), _r("tags"), _r("groups"), _r("contacts"), _r("social_feeds")),
        ),
        ResourceType("images", "images", "top", "ALL", _STAMPS, (), (_r("tags"),), listable=False),
        ResourceType("tags", "tags", "top", "ALL", (), (), (_r("tags"),), listable=False),
        ResourceType("groups", "groups", "top", "ALL", (), (), (), listable=False),
    )
}

#: Relationships the spec gives a route of their own (`GET /<type>/{id}/<relationship>`): the
#: way to their linkage when the upstream refuses them in `include=` (`sync.jobs.malls.relroutes`).
RELATED_ROUTES: dict[str, frozenset[str]] = {
    "articles": frozenset({"images", "malls", "products", "tags"}),
    "deals": frozenset({"stores", "images", "tags"}),
    "events": frozenset({"groups", "images"}),
    "ifeatures": frozenset({"mall"}),
    "job_listings": frozenset({"images", "store"}),
    "mall_messages": frozenset({"mall"}),
}

#: Types with a collection route, in the order a backfill lists them (malls first: the
#: mall-scoped types need the mall ids).
LISTABLE: tuple[str, ...] = tuple(name for name, t in TYPES.items() if t.listable)

#: Mall-level data outside JSON:API collections: `/malls/{id}/hours` and `/current-hours`.
HOURS_TABLE = "hours"
CURRENT_HOURS_TABLE = "current_hours"

#: The deletions feed: its own cursor, never a table.
DELETIONS_FEED = "deletions"

#: Types a deployment may never mirror: they hold credentials or are our own subscriptions.
NEVER_MIRRORED = frozenset({"accounts", "webhooks", "deletions"})


def normalize_type(raw: str) -> str | None:
    """Map the spellings an upstream may use for a type to its catalogue name, or None.

    Deletion entries and webhook notices name types as `resource_type`; the spec does not fix
    the spelling and itself writes "i-features" and "job listings". Accepted: the JSON:API type
    (`job_listings`), the path (`job-listings`), words apart ("job listings", "Job Listings"),
    the class name (`JobListing`, `IFeature`, `PressRelease`), singular or plural, any case.
    """
    s = raw.strip()
    if not s:
        return None
    if s in TYPES:
        return s
    # Words: split at separators and at case changes (JobListing, IFeature, JOB_LISTINGS).
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", s)
    words = [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]
    for base in ("_".join(words), "".join(words)):
        for candidate in (base, base + "s", base + "es"):
            if candidate in TYPES:
                return candidate
    return None


def resolve(names: Iterable[str]) -> list[ResourceType]:
    """The catalogue entries for `names` (listable types), in backfill order."""
    wanted = set(names)
    unknown = wanted - set(LISTABLE)
    if unknown:
        raise KeyError(", ".join(sorted(unknown)))
    return [TYPES[n] for n in LISTABLE if n in wanted]


#: The one attribute a backfill asks for of the included types it trims (see `sideload_trim`).
TRIM_FIELD = "updated_at"


def sideload_trim(rtype: ResourceType, listed: Collection[str]) -> tuple[str, ...]:
    """The included types a backfill listing of `rtype` need not receive whole: those it lists itself.

    A deal page sideloads each deal's stores (the linkage the `deals_stores` links are made of
    comes only with `include=`), yet the same backfill lists every store on its own pages: whole
    copies of such types are ~40 % of a backfill's bytes. Their sparse fieldset asks for one
    attribute (`fields[stores]=updated_at`, see `trim_params`) and their included copies are not
    stored. Never the listed type itself (its fieldset would trim the listed rows), nor a type
    without `updated_at`, nor a type the backfill does not list (its included copies are its
    only source).
    """
    return tuple(
        sorted(
            {
                r.target
                for r in rtype.relationships
                if r.target != rtype.name and r.target in listed and TYPES[r.target].has_updated_at
            }
        )
    )


def trim_params(trimmed: Iterable[str]) -> dict[str, str]:
    """The query parameters that trim those included types to `TRIM_FIELD`."""
    return {f"fields[{name}]": TRIM_FIELD for name in trimmed}


def scope_key(mall_id: int | str | None = None, params: Mapping[str, str] | None = None) -> str:
    """A stable text key for one listing scope: '' (top level), 'mall=7', 'filter[visibility]=Unlisted'.

    Cursors, backfill checkpoints and reconcile passes are kept per (type, scope key).
    """
    parts = [] if mall_id is None else [f"mall={mall_id}"]
    parts += [f"{k}={v}" for k, v in sorted((params or {}).items())]
    return "&".join(parts)
