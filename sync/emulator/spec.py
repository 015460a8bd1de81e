"""The spec's tables as the emulator serves them: types, relationships, routes, channels, filters.

Everything here is a fact of the Channel Content API spec (`../shared/spec/`) or the emulator's
reading of it, written once so the data set, the query parser, the encoder and the handlers all
answer from the same table. The emulator keeps its own copy rather than the client's catalogue
(`sync.model.catalogue`): it must serve the spec, not the client's idea of it.
"""

from __future__ import annotations

from typing import Any

#: The resource types the emulator holds and changes, malls apart, in the order the generator
#: makes them and random changes draw them (the order is part of a seed's data set).
TYPES: tuple[str, ...] = (
    "stores",
    "deals",
    "products",
    "events",
    "articles",
    "job_listings",
    "images",
    "mall_messages",
    "press_releases",
    "ifeatures",
    "contacts",
    "tags",
    "programs",
    "social_feeds",
    "groups",
)
#: Types whose rows belong to a mall (`Rec.mall`), listed under `/malls/{id}/<type>`.
MALL_SCOPED = frozenset(
    {
        "stores",
        "products",
        "programs",
        "social_feeds",
        "press_releases",
        "events",
        "ifeatures",
        "mall_messages",
        "contacts",
        "job_listings",
    }
)
#: Types that only sideloads reach (no route of their own); their owners include them.
SIDELOADED = ("images", "tags", "groups")
#: Relationships served per type (spec table); the modelled ones carry linkage when included.
RELATIONSHIPS: dict[str, tuple[str, ...]] = {
    "articles": ("variants", "images", "malls", "products", "tags"),
    "images": ("tags",),
    "malls": (
        "accounts",
        "articles",
        "contacts",
        "deals",
        "events",
        "groups",
        "ifeatures",
        "images",
        "job_listings",
        "mall_messages",
        "press_releases",
        "products",
        "programs",
        "retailers",
        "sites",
        "social_feeds",
        "stores",
        "theaters",
        "redeemables",
        "company",
        "location",
    ),
    "products": ("images", "stores", "tags", "articles", "brand", "retailer"),
    "tags": ("tags",),
    "contacts": (),
    "deals": (
        "images",
        "tags",
        "stores",
        "external_mapping_for_stores",
        "external_mapping_for_retailers",
        "locations",
        "retailer",
    ),
    "stores": (
        "products",
        "deals",
        "job_listings",
        "social_feeds",
        "contacts",
        "images",
        "tags",
        "groups",
        "keywords",
        "external_mapping_for_stores",
        "showtimes",
        "retailer",
        "location",
        "mall",
    ),
    "deletions": (),
    "events": ("images", "groups", "tags", "mall"),
    "groups": (),
    "ifeatures": ("mall",),
    "job_listings": ("images", "store"),
    "mall_messages": ("mall",),
    "press_releases": ("mall",),
    "programs": (),
    "social_feeds": (),
    "webhooks": (),
}
TO_ONE = frozenset({"mall", "store", "retailer", "location", "company", "brand"})
#: The type a relationship names, where its name is not the type's.
TARGET = {"mall": "malls", "store": "stores", "job_listings": "job_listings"}
#: Relationships whose linkage one side owns and the other serves as the inverse: (type, name)
#: -> (owner type, owner's relationship). A change of the owner's links changes the inverse
#: linkage without touching the other side's `updated_at`.
INVERSE: dict[tuple[str, str], tuple[str, str]] = {
    ("stores", "products"): ("products", "stores"),
    ("stores", "deals"): ("deals", "stores"),
    ("stores", "job_listings"): ("job_listings", "store"),
    ("products", "articles"): ("articles", "products"),
    ("malls", "articles"): ("articles", "malls"),
}
#: Members with no collection route of their own: listed only as `/malls/{id}/<type>`.
PER_MALL_ONLY = frozenset({"stores", "products", "programs", "social_feeds", "press_releases"})
#: A mall's relationships that name its members: the mall-scoped types listed under
#: `/malls/{id}/...`, and its deals (`Rows.mall_deals`).
MALL_MEMBERS = MALL_SCOPED | {"deals"}
#: Relationships whose linkage the emulator models (owned in `Rec.links`, an inverse, or a
#: mall's members); the spec's other relationships (variants, brand, retailer, keywords, ...,
#: whose types' fields are "not shown") are served with links only and refused in `include=`.
MODELLED: dict[str, frozenset[str]] = {
    "articles": frozenset({"images", "malls", "products", "tags"}),
    "images": frozenset({"tags"}),
    "tags": frozenset({"tags"}),
    "products": frozenset({"images", "stores", "tags", "articles"}),
    "deals": frozenset({"images", "tags", "stores"}),
    "stores": frozenset(
        {"products", "deals", "job_listings", "social_feeds", "contacts", "images", "tags"}
        | {"groups", "mall"}
    ),
    "events": frozenset({"images", "groups", "tags", "mall"}),
    "ifeatures": frozenset({"mall"}),
    "job_listings": frozenset({"images", "store"}),
    "mall_messages": frozenset({"mall"}),
    "press_releases": frozenset({"mall"}),
    "malls": frozenset(
        {"images", "articles", "contacts", "deals", "events", "ifeatures", "job_listings"}
        | {"mall_messages", "press_releases", "products", "programs", "social_feeds", "stores"}
    ),
}
DEPRECATED_FIELDS = [
    "is_active",
    "is_apply_online",
    "manager_name",
    "fax_number",
    "email",
    "salary",
    "required_experience",
    "key_responsibilities",
    "special_information",
]
#: Every job listing's `meta` (one shared object: the encoding templates rely on it).
JOB_META: dict[str, Any] = {"deprecated_fields": list(DEPRECATED_FIELDS)}
#: The days of the week as the spec's hours and `structured_hours` name them, Monday first.
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# -- routes ------------------------------------------------------------------------------------

#: URL path segments that are not the type's name.
PATHS = {
    "job_listings": "job-listings",
    "mall_messages": "mall-messages",
    "press_releases": "press-releases",
    "social_feeds": "social-feeds",
}


def path_of(type_name: str) -> str:
    return PATHS.get(type_name, type_name)


#: Relationships served with links only under `Hard.deals_without_stores`: both sides of the
#: deal-store tie.
DEAL_STORE = frozenset({("deals", "stores"), ("stores", "deals")})
BY_PATH = {path_of(t): t for t in RELATIONSHIPS}
#: The top-level collections and the channel an account needs for each.
TOP_CHANNEL = {
    "articles": "editorial",
    "contacts": "mall",
    "deals": "deal",
    "events": "mall",
    "ifeatures": "mall",
    "job_listings": "mall",
    "mall_messages": "mall",
    "malls": "ALL",
    "deletions": "ALL",
}
#: The `/malls/{id}/<type>` listings and the channels that may read each.
MALL_CHANNEL: dict[str, tuple[str, ...]] = {
    "events": ("mall",),
    "mall_messages": ("mall",),
    "contacts": ("mall",),
    "ifeatures": ("mall",),
    "job_listings": ("mall",),
    "press_releases": ("mall",),
    "programs": ("mall",),
    "deals": ("deal",),
    "products": ("product",),
    "social_feeds": ("mall", "store"),
    "stores": ("deal", "store"),
}
#: The listings whose spec row documents `sort`: top-level, and under `/malls/{id}/` (all but
#: programs). Under `Hard.sort_undocumented_ignored` the others ignore it (rows in id order);
#: related routes (`RELATED_ROUTES`) serve their linkage's order whatever the switch.
SORTED = frozenset({"deals", "events", "malls"})
SORTED_IN_MALL = frozenset(MALL_CHANNEL) - {"programs"}
#: `GET /<type>/{id}/<relationship>` routes and the channel each needs.
RELATED_ROUTES: dict[str, dict[str, str]] = {
    "articles": {
        "images": "editorial",
        "malls": "editorial",
        "products": "editorial",
        "tags": "editorial",
    },
    "deals": {"stores": "deal", "images": "deal", "tags": "deal"},
    "events": {"groups": "mall", "images": "mall"},
    "ifeatures": {"mall": "mall"},
    "job_listings": {"images": "mall", "store": "store"},
    "mall_messages": {"mall": "mall"},
}

# -- filters -----------------------------------------------------------------------------------

#: Attributes `filter[<field>][lt|lte|gt|gte]` accepts.
DATE_FIELDS = frozenset(
    {
        "created_at",
        "updated_at",
        "display_at",
        "start_at",
        "end_at",
        "trending_expired_at",
        "opening_date",
    }
)
#: Attributes `filter[<attribute>]=a,b` accepts, per type.
EQUAL_FILTERS: dict[str, frozenset[str]] = {
    "deals": frozenset({"visibility"}),
    "events": frozenset({"is_active", "is_featured"}),
    "malls": frozenset({"name", "sort_name"}),
    "deletions": frozenset({"resource_type"}),
    "mall_messages": frozenset({"message_type"}),
}
