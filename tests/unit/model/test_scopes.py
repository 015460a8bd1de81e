"""sync.model.scopes: a type's scopes (per mall, per deal visibility) and their keys."""

from __future__ import annotations

from sync.model.catalogue import TYPES
from sync.model.scopes import Scope, scopes_of


def test_a_mall_type_has_one_scope_per_mall_a_top_type_one() -> None:
    assert [s.key for s in scopes_of(TYPES["stores"], [3, 1])] == ["mall=3", "mall=1"]
    assert scopes_of(TYPES["stores"], []) == []
    [events] = scopes_of(TYPES["events"], [3, 1])
    assert (events.mall_id, events.key) == (None, "")


def test_deals_have_one_scope_per_visibility() -> None:
    keys = [s.key for s in scopes_of(TYPES["deals"], [5])]
    assert keys == [
        "filter[visibility]=Public",
        "filter[visibility]=Unlisted",
        "filter[visibility]=Private",
    ]


def test_scopes_are_equal_values() -> None:
    a = Scope(TYPES["stores"], 4)
    assert a == Scope(TYPES["stores"], 4) and a.key == "mall=4"
    assert a != Scope(TYPES["stores"], 5)
    assert Scope(TYPES["stores"], 4, {"x": "y"}).key == "mall=4&x=y"
