"""`sync.jobs.probe`: what `ccsync probe` prints of a profile: the API version, and one line per
thing the upstream does that sync cannot use."""

from __future__ import annotations

from dataclasses import asdict

from sync.channel.profile import RouteProfile, UpstreamProfile
from sync.jobs.probe import api_version, route_words, unusable


def test_the_api_version_or_what_was_not_served() -> None:
    assert api_version(UpstreamProfile(api_version="2.3")) == "2.3"
    assert api_version(UpstreamProfile()) == "not served (no X-API-Version header)"


def test_a_profile_that_is_all_usable_has_no_line() -> None:
    good = RouteProfile("/deals", sort="honoured", sort_desc="honoured", filter="honoured")
    good.includes = {"images": "honoured"}
    good.etag = "stable"
    assert unusable(UpstreamProfile(api_version="1", routes={"/deals": good})) == []


def test_each_unusable_answer_is_one_line_naming_the_route() -> None:
    deals = RouteProfile("/deals", sort="ignored", filter="refused", etag="none")
    deals.includes = {"tags": "refused", "images": "refused", "stores": "honoured"}
    deals.include_errors = {"tags": "HTTP 400: bad include"}
    deals.linkage_from = {"tags": "/deals/{id}/relationships/tags"}
    stores = RouteProfile("/malls/{id}/stores", sort="refused", etag="unstable")
    profile = UpstreamProfile(routes={"/malls/{id}/stores": stores, "/deals": deals})
    assert unusable(profile) == [
        "X-API-Version: not served; a change of major version cannot be told",
        "/deals include=images: refused; left out of listings",
        "/deals include=tags: HTTP 400: bad include; left out of listings; its linkage from "
        "/deals/{id}/relationships/tags",
        "/deals: no ETag; polls ask without If-None-Match",
        "/deals: sort=updated_at ignored; polled unsorted",
        "/deals: filter[updated_at][gte] refused; polls read whole listings",
        "/malls/{id}/stores: ETag changes between identical requests; polls unconditional",
        "/malls/{id}/stores: sort=updated_at refused; polled unsorted",
    ]


def test_a_refused_descending_sort_alone_is_not_reported_as_polled_unsorted() -> None:
    deals = RouteProfile("/deals", sort="honoured", sort_desc="refused", filter="honoured")
    deals.etag = "stable"
    assert deals.sorted_walk  # the poll walks it by key
    lines = unusable(UpstreamProfile(api_version="1", routes={"/deals": deals}))
    assert not [line for line in lines if "polled unsorted" in line], lines
    assert "/deals: sort=-updated_at refused; polls need only the ascending" in lines


def test_the_deletions_feed_is_worded_in_its_own_terms() -> None:
    """`/deletions unknown unknown unknown unknown` said nothing (#48): the feed has no
    `updated_at`, so status says what its `unknown` means and what is not probed."""
    assert route_words("/deletions", asdict(RouteProfile("/deletions"))) == (
        "the deletions feed, read from its cursor (sort by created_at unknown; unknown: fewer "
        "than two entries to compare); filter and etag not probed"
    )
    sorted_feed = asdict(RouteProfile("/deletions", sort="honoured"))
    assert route_words("/deletions", sorted_feed).startswith(
        "the deletions feed, read from its cursor (sort by created_at honoured); "
    )
    deals = asdict(RouteProfile("/deals", sort="honoured", etag="304"))
    assert route_words("/deals", deals) == "walked by updated_at; etag 304"
