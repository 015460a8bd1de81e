"""The column type of every attribute the spec lists, per resource type.

The spec states each attribute's type (string, integer, number, boolean, timestamp, object,
array, "or null"); the mirror declares its columns from it, so a table's schema does not depend
on which rows happen to come first (a first page whose `is_active` or `distance` values are all
null must not make a TEXT column that later stores `true` as '1' and sorts 10.2 before 3.5).

SQLite affinities: strings, timestamps and decimals-as-strings TEXT; integers and booleans (0/1)
INTEGER; numbers REAL; objects and arrays TEXT (JSON). Attributes the spec does not list (new
upstream attributes, `meta_*`) are inferred from their values: see `sync.store.schema`.
"""

from __future__ import annotations

from typing import Literal

from sync.model import catalogue

Affinity = Literal["TEXT", "INTEGER", "REAL"]

_STAMPS = ("created_at", "updated_at")


def _decl(
    text: tuple[str, ...] = (),
    integer: tuple[str, ...] = (),
    real: tuple[str, ...] = (),
) -> dict[str, Affinity]:
    out: dict[str, Affinity] = {}
    out.update(dict.fromkeys((*text, *_STAMPS), "TEXT"))
    out.update(dict.fromkeys(integer, "INTEGER"))
    out.update(dict.fromkeys(real, "REAL"))
    return out


#: Declared column types per type, from the spec's "Resources and their fields" table.
#: Booleans are INTEGER (0/1); `stores.fax`, `open_at` and `close_at` are "nullable" without a
#: type in the spec: a fax number and times of day are text; `stores.distance` is a number as
#: `malls.distance` is.
DECLARED: dict[str, dict[str, Affinity]] = {
    "articles": _decl(
        (
            "title",
            "subtitle",
            "short_title",
            "author",
            "attribution",
            "teaser",
            "seo_slug",
            "content",
            "feature_location",
            "status",
            "display_at",
            "end_at",
            "trending_expired_at",
        ),
        ("is_active", "display_order"),
    ),
    "images": _decl(("url", "alt_text", "size_parameter")),
    "malls": _decl(
        (
            "name",
            "sort_name",
            "seo_slug",
            "nick_name",
            "address",
            "city",
            "state",
            "zip",
            "country_code",
            "phone",
            "email",
            "url",
            "hours_text",
            "description",
            "guest_services_description",
        ),
        ("exclude_national_deals",),
        ("distance", "latitude", "longitude"),
    ),
    "products": _decl(("name", "seo_slug", "description", "price")),
    "tags": {"name": "TEXT"},
    "groups": {"name": "TEXT"},
    "contacts": _decl(("name", "title", "email", "phone")),
    "deals": _decl(
        (
            "sales_type",
            "title",
            "seo_slug",
            "retailer_name",
            "retailer_sort_name",
            "external_url",
            "description",
            "fine_print_description",
            "end_at_text",
            "store_name",
            "store_sort_name",
            "display_at",
            "start_at",
            "end_at",
            "status",
            "visibility",
        ),
        ("is_local", "is_featured", "is_active"),
    ),
    "stores": _decl(
        (
            "name",
            "sort_name",
            "seo_slug",
            "email",
            "address",
            "city",
            "state",
            "zip",
            "phone",
            "mall_name",
            "tenant_location",
            "tenant_location_map_key",
            "hours",
            "description",
            "url",
            "url_text",
            "page_url",
            "retailer_url",
            "opening_text",
            "now_open_text",
            "fax",
            "open_at",
            "close_at",
            "opening_date",
            "structured_hours",
        ),
        ("is_featured", "exclude_national_deals", "is_verified", "retailer_id"),
        ("distance", "latitude", "longitude"),
    ),
    "events": _decl(
        (
            "title",
            "short_text",
            "description",
            "seo_slug",
            "end_at_text",
            "link_url",
            "link_text",
            "location",
            "date_text",
            "start_at",
            "end_at",
            "display_at",
        ),
        ("pin_order", "is_events_page", "is_active", "is_featured"),
    ),
    "ifeatures": _decl(
        (
            "seo_slug",
            "headline",
            "sub_heading",
            "tag_line",
            "description",
            "url",
            "start_at",
            "end_at",
        ),
        ("pin_order", "is_static", "is_headline", "is_new_window"),
    ),
    "job_listings": _decl(
        (
            "title",
            "seo_slug",
            "store_name",
            "experience",
            "how_to_apply",
            "application_url",
            "description",
            "manager_name",
            "fax_number",
            "email",
            "salary",
            "start_date_text",
            "hours_per_week",
            "number_of_openings",
            "key_responsibilities",
            "required_experience",
            "special_information",
            "display_at",
            "end_at",
        ),
        ("is_full_time", "is_apply_online"),
    ),
    "mall_messages": _decl(("description", "message_type", "start_at", "end_at")),
    "press_releases": _decl(
        (
            "name",
            "seo_slug",
            "headline",
            "tag_line",
            "content",
            "phone",
            "email",
            "external_url",
            "pr_type",
            "display_at",
        ),
        ("is_active",),
    ),
    "programs": _decl(("name", "program_type", "properties")),
    "social_feeds": _decl(
        ("sociable_type", "name", "properties"),
        ("social_network_id", "sociable_id", "is_active"),
    ),
}

#: Attributes the spec says may be null ("or null", "nullable"): the emulator's `null_first`
#: serves them null on the first rows of each type, the hard case for column types.
NULLABLE: dict[str, tuple[str, ...]] = {
    "articles": ("trending_expired_at",),
    "malls": ("distance",),
    "deals": ("store_name", "store_sort_name"),
    "stores": ("fax", "open_at", "close_at", "distance"),
    "social_feeds": ("is_active",),
}


#: Columns INTEGER in every table, catalogued or not: the key, and the mall a row belongs to.
KEY_COLUMNS: dict[str, Affinity] = {"id": "INTEGER", "mall_id": "INTEGER"}


def _column_types(type_name: str) -> dict[str, Affinity]:
    rels = catalogue.TYPES[type_name].relationships
    to_one: dict[str, Affinity] = {r.column: "INTEGER" for r in rels if r.to_one}
    return {**to_one, **DECLARED.get(type_name, {}), **KEY_COLUMNS}


#: Every catalogued table's declared column types, as one value: the spec's attributes, plus
#: `id`, `mall_id` and to-one `<relationship>_id` columns INTEGER. A column not named here is
#: inferred from its values (`sync.store.schema`); a table not named declares `KEY_COLUMNS`.
COLUMN_TYPES: dict[str, dict[str, Affinity]] = {
    name: _column_types(name) for name in catalogue.TYPES
}


#: Attributes the spec types boolean: INTEGER columns holding 0/1.
BOOLEANS = frozenset(
    {
        "exclude_national_deals",
        "is_active",
        "is_apply_online",
        "is_events_page",
        "is_featured",
        "is_full_time",
        "is_headline",
        "is_local",
        "is_new_window",
        "is_static",
        "is_verified",
    }
)

#: What the value of a declared number or boolean attribute must be (`sync.pipeline.staging` checks it).
ValueKind = Literal["boolean", "integer", "number"]


def _kinds(columns: dict[str, Affinity]) -> dict[str, ValueKind]:
    out: dict[str, ValueKind] = {}
    for column, affinity in columns.items():
        if affinity == "INTEGER":
            out[column] = "boolean" if column in BOOLEANS else "integer"
        elif affinity == "REAL":
            out[column] = "number"
    return out


#: Per type, its declared number and boolean attributes and what their values must be. Text
#: columns are not listed: they hold strings, objects and arrays alike (as JSON text).
VALUE_KINDS: dict[str, dict[str, ValueKind]] = {t: _kinds(c) for t, c in DECLARED.items()}
