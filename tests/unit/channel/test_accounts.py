"""sync.channel.accounts: routes, which account sends a request, what 403/404 teach, and the kept record."""

from __future__ import annotations

from typing import Any

import orjson

from sync.channel.accounts import META_KEY, Accounts, loads, route_of
from sync.core.config import UpstreamSettings


def _accounts(*emails: str, **settings: Any) -> Accounts:
    return Accounts(
        UpstreamSettings(
            base_url="http://u",
            accounts=[{"email": e, "password": "pw"} for e in emails],  # type: ignore[misc]
            **settings,
        )
    )


def test_route_of_replaces_id_segments_only() -> None:
    assert route_of("/malls/12/stores") == "/malls/{id}/stores"
    assert route_of("/deals/5") == "/deals/{id}"
    assert route_of("/deals") == "/deals"
    assert route_of("/malls/12a/stores") == "/malls/12a/stores"


def test_a_403_moves_the_route_to_the_next_account_and_a_success_makes_the_reader() -> None:
    accounts = _accounts("a@x", "b@x", "c@x")
    a, b, c = accounts.all
    route = "/deals"
    assert accounts.pick(route) is a
    assert accounts.next_after(route, a, 403, {1}) is b
    assert accounts.pick(route) is b
    assert accounts.next_after(route, b, 200, {1, 2}) is None
    assert accounts.readers == {route: "b@x"} and accounts.refused[route] == {"a@x"}
    assert accounts.reader(route) is b and accounts.reader("/events") is a
    # the reader refused later: forgotten, the next not refused asked
    assert accounts.next_after(route, b, 403, {2}) is c
    assert route not in accounts.readers and accounts.refused[route] == {"a@x", "b@x"}
    # every account refused: the 403 stands, and the first is picked
    assert accounts.next_after(route, c, 403, {3}) is None
    assert accounts.pick(route) is a


def test_a_404_from_an_account_not_proven_to_read_asks_the_others() -> None:
    accounts = _accounts("a@x", "b@x")
    a, b = accounts.all
    assert accounts.next_after("/malls/{id}/stores", a, 404, {1}) is b
    assert accounts.next_after("/malls/{id}/stores", b, 404, {1, 2}) is None  # all said 404
    accounts.readers["/deals/{id}"] = "a@x"
    assert accounts.next_after("/deals/{id}", a, 404, {1}) is None  # its reader: a fact


def test_one_account_or_a_pinned_one_is_never_routed() -> None:
    one = _accounts("a@x")
    assert one.next_after("/deals", one.first, 403, {1}) is None
    assert one.refused == {} and not one.several
    two = _accounts("a@x", "b@x")
    with two.pinned(two.all[1]):
        assert two.pick("/deals") is two.all[1]
        assert two.next_after("/deals", two.all[1], 403, {2}) is None
    assert two.pick("/deals") is two.all[0]


def test_budgets_are_shared_or_one_per_account() -> None:
    shared = _accounts("a@x", "b@x")
    assert len(shared.budgets()) == 1 and shared.all[0].budget is shared.all[1].budget
    each = _accounts("a@x", "b@x", budget="per_account")
    assert len(each.budgets()) == 2
    assert _accounts("a@x", max_requests_per_second=0).budgets() == []


def test_the_record_is_kept_restored_and_read_back_whatever_its_damage() -> None:
    meta: dict[str, str] = {}
    first = _accounts("a@x", "b@x")
    first.keep(meta.get, meta.__setitem__)
    first.next_after("/deals", first.all[0], 403, {1})
    first.next_after("/deals", first.all[1], 200, {1, 2})
    assert orjson.loads(meta[META_KEY]) == {
        "readers": {"/deals": "b@x"},
        "refused": {"/deals": ["a@x"]},
    }
    again = _accounts("a@x", "b@x")
    again.readers["/events"] = "a@x"  # learned in this run before the record was read
    again.keep(meta.get, meta.__setitem__)
    assert again.readers == {"/deals": "b@x", "/events": "a@x"}
    assert orjson.loads(meta[META_KEY])["readers"] == {"/deals": "b@x", "/events": "a@x"}
    single: dict[str, str] = {}
    _accounts("a@x").keep(single.get, single.__setitem__)
    assert single == {}
    empty: dict[str, dict[str, Any]] = {"readers": {}, "refused": {}}
    for damaged in (None, "", "{", "[1]", '{"readers": [], "refused": 3}'):
        assert loads(damaged) == empty
    assert loads('{"readers": {"/d": 1, "/e": "x"}, "refused": {"/d": ["y", 2], "/e": "z"}}') == {
        "readers": {"/e": "x"},
        "refused": {"/d": ["y"]},
    }
