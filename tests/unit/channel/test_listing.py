"""sync.channel.listing: a `Listing` is a frozen value whose path and type come from its scope."""

from __future__ import annotations

import dataclasses

import pytest

from sync.channel.listing import Listing
from sync.model.catalogue import TYPES
from sync.model.scopes import Scope


def test_path_and_type_follow_the_scope() -> None:
    unlisted = Scope(TYPES["deals"], None, {"filter[visibility]": "Unlisted"})
    listing = Listing.of(unlisted)
    assert (listing.path, listing.rtype.name) == ("/deals", "deals")
    assert (listing.params, listing.fields, listing.include, listing.size) == ({}, None, True, None)
    assert listing.scope.key == "filter[visibility]=Unlisted"  # the scope's filters stay its own
    with pytest.raises(ValueError, match="programs is listed per mall"):
        _ = Listing(Scope(TYPES["programs"])).path


def test_listings_compare_by_value_and_cannot_change() -> None:
    scope = Scope(TYPES["stores"], 3)
    assert Listing(scope, {"sort": "id"}, size=5) == Listing(scope, {"sort": "id"}, size=5)
    assert Listing(scope, size=5) != Listing(scope, size=6)
    assert Listing(scope) != Listing(Scope(TYPES["stores"], 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Listing(scope).size = 9  # type: ignore[misc]
    trimmed = dataclasses.replace(Listing(scope), include=False)
    assert Listing.of(trimmed) is trimmed and not trimmed.include
