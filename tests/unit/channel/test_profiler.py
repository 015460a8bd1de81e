"""sync.channel.profiler: the probes' verdicts (an order, what `gte=T&lte=T` says the filter
compares) and what a probe keeps of refused include paths."""

from __future__ import annotations

from typing import cast

import pytest

from sync.channel.profile import RouteProfile
from sync.channel.profiler import Probed, Profiler, _compared, _sorted, note_refusals


@pytest.mark.parametrize(
    ("stamps", "ascending", "verdict"),
    [
        (None, True, "refused"),
        (["2026-01-01"] * 3, True, "unknown"),
        ([], False, "unknown"),
        (["a", "b", "b", "c"], True, "honoured"),
        (["c", "b", "a"], True, "ignored"),
        (["c", "b", "a"], False, "honoured"),
    ],
)
def test_an_order_is_judged_only_on_two_distinct_stamps(
    stamps: list[str] | None, ascending: bool, verdict: str
) -> None:
    assert _sorted(stamps, ascending=ascending) == verdict


@pytest.mark.parametrize(
    ("got", "compares"),
    [(None, "unknown"), (["2026-01-01T00:00:01.000Z"], "served"), ([], "finer")],
)
def test_what_gte_and_lte_at_one_stamp_say_the_filter_compares(
    got: list[str] | None, compares: str
) -> None:
    """The rows served at T come back under `gte=T&lte=T`: compared as served; none come back:
    the upstream compares below the millisecond it serves; refused: unknown."""
    assert _compared("2026-01-01T00:00:01.000Z", got) == compares


def test_note_refusals_keeps_reasons_and_where_nested_linkage_comes_from() -> None:
    prober = Profiler(cast(Probed, object()))
    prober.asked = {"images", "images.tags", "tags", "tags.tags"}
    prober.reasons = {"images.tags": "HTTP 400: bad include", "tags.tags": "HTTP 500"}
    prober.carried = {"images.tags"}
    route = RouteProfile(
        "/deals",
        includes={
            "images": "linkage",
            "images.tags": "refused",
            "tags": "refused",
            "tags.tags": "refused",
        },
        include_errors={"images": "stale reason"},
    )
    note_refusals(route, prober)
    assert route.include_errors == {
        "images.tags": "HTTP 400: bad include",
        "tags": "",
        "tags.tags": "HTTP 500",
    }
    assert route.linkage_from == {"images.tags": "include=images", "tags.tags": "not mirrored"}
