"""sync.model.catalogue: routes, include paths, link tables, type spellings, trims and scope keys."""

from __future__ import annotations

import pytest

from sync.model import catalogue
from sync.model.catalogue import TYPES, Relationship


def test_list_path_is_top_level_or_per_mall_and_a_mall_type_needs_its_mall() -> None:
    assert TYPES["job_listings"].list_path() == "/job-listings"
    assert TYPES["job_listings"].list_path(mall_id=3) == "/job-listings"
    assert TYPES["social_feeds"].list_path(7) == "/malls/7/social-feeds"
    with pytest.raises(ValueError, match=r"^stores is listed per mall; a mall id is required$"):
        TYPES["stores"].list_path()


def test_include_goes_one_level_into_sideloaded_types_only() -> None:
    assert TYPES["deals"].include == "images,images.tags,tags,tags.tags,stores"
    assert TYPES["events"].include == "images,images.tags,groups,tags,tags.tags,mall"
    assert TYPES["contacts"].include == ""


def test_link_tables_and_columns_stay_distinct_for_self_links() -> None:
    tags = Relationship("tags", "tags")
    assert tags.link_table("deals") == "deals_tags"
    assert tags.link_columns("deals") == ("deals_id", "tags_id")
    assert tags.link_columns("tags") == ("tags_id", "related_tags_id")
    assert Relationship("mall", "malls", to_one=True).column == "mall_id"


def test_a_type_s_link_tables_are_values_of_its_to_many_relationships_only() -> None:
    events = TYPES["events"]
    assert [
        (lt.table, lt.owner_column, lt.related_column, lt.target) for lt in events.link_tables
    ] == [
        ("events_images", "events_id", "images_id", "images"),
        ("events_groups", "events_id", "groups_id", "groups"),
        ("events_tags", "events_id", "tags_id", "tags"),
    ]  # `mall` is to-one: a column, no link table
    tags = TYPES["tags"].link_tables
    assert [(lt.owner_column, lt.related_column) for lt in tags] == [("tags_id", "related_tags_id")]


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("  deals ", "deals"),
        ("mall-messages", "mall_messages"),
        ("Social Feed", "social_feeds"),
        ("store", "stores"),
        ("", None),
        ("   ", None),
        ("webhook", None),
    ],
)
def test_normalize_type_spellings(raw: str, name: str | None) -> None:
    assert catalogue.normalize_type(raw) == name


def test_resolve_keeps_backfill_order_and_names_every_unknown_type() -> None:
    names = [t.name for t in catalogue.resolve(["stores", "deals", "malls"])]
    assert names == ["malls", "deals", "stores"]
    with pytest.raises(KeyError, match="images, zebras"):
        catalogue.resolve(["deals", "zebras", "images"])


def test_sideload_trim_leaves_out_the_listed_type_unlisted_and_stampless_targets() -> None:
    listed = set(catalogue.LISTABLE)
    assert catalogue.sideload_trim(TYPES["deals"], listed) == ("stores",)
    assert catalogue.sideload_trim(TYPES["deals"], listed - {"stores"}) == ()
    assert catalogue.sideload_trim(TYPES["events"], listed) == ("malls",)
    assert catalogue.trim_params(("malls", "stores")) == {
        "fields[malls]": "updated_at",
        "fields[stores]": "updated_at",
    }


def test_scope_key_is_stable_whatever_the_order_of_params() -> None:
    assert catalogue.scope_key() == ""
    assert catalogue.scope_key(7) == "mall=7"
    assert catalogue.scope_key(None, {"b": "2", "a": "1"}) == "a=1&b=2"
    assert catalogue.scope_key("7", {"filter[visibility]": "Unlisted"}) == (
        "mall=7&filter[visibility]=Unlisted"
    )


def test_never_mirrored_types_are_not_listable() -> None:
    assert not catalogue.NEVER_MIRRORED & set(catalogue.LISTABLE)
    assert catalogue.LISTABLE[0] == "malls"
