"""`sync.jobs.proving.proof`: a cycle's units and cost, a rolling step that keeps its page and diffs a
unit once listed, and a failing unit that leaves its type unproven while the cycle goes on."""

from __future__ import annotations

from typing import Any

import pytest

from sync.core.errors import RetriesExhaustedError
from sync.jobs.proving.proof import Proof, Unit
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.store import Mirror
from tests.support.jobfakes import FakeClient, ids, res, stamp, table

CONTACTS = catalogue.TYPES["contacts"]
DEALS = catalogue.TYPES["deals"]
STORES = catalogue.TYPES["stores"]
PROGRAMS = catalogue.TYPES["programs"]


def test_a_cycle_lists_each_type_then_finishes(mirror: Mirror) -> None:
    proof = Proof(
        FakeClient(),
        mirror,
        [CONTACTS, STORES, PROGRAMS],
        max_delete_share=0.5,
        prefix="x:",
        fast=lambda: ["stores"],
    )
    assert proof.units([1, 2]) == [
        Unit("x:contacts", "contacts", None, "list"),
        Unit("x:@members", "", None, "members"),  # the fast path's walk, once, first
        Unit("x:stores@1", "stores", 1, "list"),
        Unit("x:stores@2", "stores", 2, "list"),
        Unit("x:stores@orphans", "stores", None, "orphans"),
        Unit("x:programs@1", "programs", 1, "list"),
        Unit("x:programs@2", "programs", 2, "list"),
        Unit("x:programs@orphans", "programs", None, "orphans"),
        Unit("x:@finish", "", None, "finish"),
    ]
    # No malls: no walk, no listing per mall.
    assert [u.kind for u in proof.units([])] == ["list", "orphans", "orphans", "finish"]


def test_the_cost_is_a_page_per_hundred_rows_of_each_scope(mirror: Mirror) -> None:
    table(mirror, "contacts", [(i, None) for i in range(1, 151)])
    table(mirror, "deals", [(i, None) for i in range(1, 251)])
    proof = Proof(
        FakeClient(),
        mirror,
        [CONTACTS, DEALS, STORES],
        max_delete_share=None,
        fast=lambda: ["stores"],
        members_page_size=2,
    )
    # contacts: 2 pages; deals: 84 rows in each of 3 visibilities, a page each; stores: the
    # walk of `/malls` pages, 2 malls a page.
    assert proof.cost([1, 2, 3]) == 2 + 3 + 2


async def test_a_rolling_step_keeps_its_page_and_a_listed_unit_is_diffed(mirror: Mirror) -> None:
    table(mirror, "contacts", [(1, stamp(1)), (2, stamp(1))])
    client = FakeClient(size=2)
    client.serve(Scope(CONTACTS), [res(1, "contacts", stamp(1)), res(3, "contacts", stamp(2))])
    told: list[tuple[str, str, int]] = []
    proof = Proof(
        client, mirror, [CONTACTS], max_delete_share=0.5, on_repair=lambda *a: told.append(a)
    )
    assert proof.at_cycle_start
    first = await proof.step(1)
    assert (first.requests, first.cycle_done) == (1, False)
    assert not proof.at_cycle_start
    assert ids(mirror, "contacts") == [1, 2]  # nothing repaired before the listing is whole
    rest = await proof.step(100)
    assert rest.cycle_done and rest.proven == ["contacts"]
    assert rest.repairs == {"contacts": {"missed_creation": 1, "missed_deletion": 1}}
    assert told == [("contacts", "missed_creation", 1), ("contacts", "missed_deletion", 1)]
    assert ids(mirror, "contacts") == [1, 3]
    # Page 1, then page 2 (the first was full), each asked once.
    assert [a for k, a in client.asked if k == "list"] == [("contacts", "", 1), ("contacts", "", 2)]
    assert proof.at_cycle_start


async def test_a_failing_unit_leaves_its_type_unproven_and_the_cycle_goes_on(
    mirror: Mirror,
) -> None:
    class Failing(FakeClient):
        async def list_page(self, request: Any, number: int, **_: Any) -> Any:
            if request.rtype.name == "contacts":
                raise RetriesExhaustedError("503 three times", status=503)
            return await super().list_page(request, number)

    table(mirror, "contacts", [(1, stamp(1))])
    table(mirror, "articles", [])
    articles = catalogue.TYPES["articles"]
    proof = Proof(Failing(), mirror, [CONTACTS, articles], max_delete_share=0.5)
    report = await proof.run_all()
    assert report.cycle_done and report.proven == ["articles"]
    assert report.unresolved == {"contacts": "contacts: 503 three times"}
    assert ids(mirror, "contacts") == [1]
    once = Proof(Failing(), mirror, [CONTACTS], max_delete_share=0.5, isolate=False)
    with pytest.raises(RetriesExhaustedError):
        await once.run_all()
