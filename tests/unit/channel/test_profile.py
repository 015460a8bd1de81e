"""sync.channel.profile: the stored profile's round trip, its printed forms, verdicts and staleness."""

from __future__ import annotations

import pytest

from sync.channel.profile import (
    SKEWS,
    RouteProfile,
    UpstreamProfile,
    contradicted,
    learned_compares,
    route_key,
    stale,
)
from sync.model.catalogue import TYPES
from sync.model.stamps import iso_ms


def _profile() -> UpstreamProfile:
    deals = RouteProfile(
        "/deals",
        sort="honoured",
        etag="304",
        includes={"tags": "linkage", "images": "refused", "images.tags": "refused"},
    )
    stores = RouteProfile("/malls/{id}/stores", sort="ignored", filter="honoured")
    return UpstreamProfile(
        probed_at="2026-01-01T00:00:00.000Z",
        api_version="1.4",
        page_size_asked=100,
        page_size_served=50,
        signing_window=5.0,
        routes={"/deals": deals, "/malls/{id}/stores": stores},
    )


def test_the_profile_survives_its_json_and_damage_reads_as_none() -> None:
    profile = _profile()
    assert UpstreamProfile.from_json(profile.to_json()) == profile
    for damaged in (None, "", "{", '{"routes": {"/d": {"nope": 1}}}', '{"unknown": 1}', "[]"):
        assert UpstreamProfile.from_json(damaged) is None, damaged


def test_route_keys_and_refused_includes() -> None:
    assert route_key(TYPES["stores"]) == "/malls/{id}/stores"
    assert route_key(TYPES["job_listings"]) == "/job-listings"
    profile = _profile()
    assert profile.refused_includes(TYPES["deals"]) == {"images", "images.tags"}
    assert profile.refused_includes(TYPES["events"]) == set()
    assert profile.route("/deals") is profile.routes["/deals"] and profile.route("/x") is None


def test_what_a_route_allows_a_poll() -> None:
    assert RouteProfile("/a").sorted_walk  # unknown: nothing contradicts it
    assert not RouteProfile("/a", sort="refused").sorted_walk
    assert RouteProfile("/a", etag="304").conditional
    assert not RouteProfile("/a", etag="stable").conditional


@pytest.mark.parametrize(
    ("window", "shown"),
    [(None, "under 2 s"), (2.0, "2-5 s"), (10.0, "10-30 s"), (SKEWS[-1], "at least 30 s")],
)
def test_the_signing_window_as_printed(window: float | None, shown: str) -> None:
    assert UpstreamProfile(signing_window=window).window() == shown


def test_rows_are_a_table_sorted_by_route() -> None:
    assert _profile().rows() == [
        (
            "/deals",
            "honoured",
            "unknown",
            "unknown",
            "unknown",
            "304",
            "images: refused, images.tags: refused, tags: linkage",
        ),
        ("/malls/{id}/stores", "ignored", "unknown", "honoured", "unknown", "unknown", "-"),
    ]


def test_a_contradiction_is_noted_once() -> None:
    profile = UpstreamProfile()
    assert contradicted(profile, "/events", "rows out of order")
    route = profile.routes["/events"]
    assert route.sort == "ignored" and route.note.startswith("rows out of order (seen 20")
    assert not contradicted(profile, "/events", "again")
    assert route.note.startswith("rows out of order")


def test_a_profile_is_stale_when_missing_unprobed_or_older_than_its_age() -> None:
    now = 1_800_000_000.0
    assert stale(None, now) and stale(UpstreamProfile(), now)
    assert not stale(UpstreamProfile(probed_at=iso_ms(now - 100)), now)
    assert stale(UpstreamProfile(probed_at=iso_ms(now - 100)), now, max_age=50)


def test_a_filter_compared_finer_than_served_is_kept_with_its_evidence() -> None:
    profile = UpstreamProfile()
    learned_compares(profile, "/deals", "finer", "a run lacked 100 rows served at T")
    route = profile.routes["/deals"]
    assert route.compares == "finer" and route.note.startswith("a run lacked 100 rows")
    assert UpstreamProfile.from_json(profile.to_json()) == profile
