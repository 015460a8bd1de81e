"""sync.channel.includes: which include paths a listing asks, its 5xx allowance, and which errors start the fallback."""

from __future__ import annotations

from sync.channel.includes import IncludeFallback
from sync.channel.profile import RouteProfile, UpstreamProfile
from sync.channel.profiler import INCLUDE_ATTEMPTS
from sync.core.errors import RetriesExhaustedError, UpstreamError
from sync.model.catalogue import TYPES
from sync.model.scopes import Scope

DEALS = TYPES["deals"]


class _Client:
    """A client whose profile is given and never probed: any probe fails the test."""

    def __init__(self, profile: UpstreamProfile | None) -> None:
        self.profile = profile

    def learn_profile(
        self, profile: UpstreamProfile | None = None, *, save: bool = True
    ) -> UpstreamProfile:
        raise AssertionError("no probe expected")


def _refusing(*paths: str) -> UpstreamProfile:
    route = RouteProfile("/deals", includes=dict.fromkeys(paths, "refused"))
    return UpstreamProfile(routes={"/deals": route})


def test_paths_leave_out_refused_paths_and_everything_under_them() -> None:
    assert IncludeFallback(_Client(None)).paths(DEALS) == DEALS.include  # type: ignore[arg-type]
    assert IncludeFallback(_Client(UpstreamProfile())).paths(DEALS) == DEALS.include  # type: ignore[arg-type]
    fallback = IncludeFallback(_Client(_refusing("images", "tags.tags")))  # type: ignore[arg-type]
    assert DEALS.include == "images,images.tags,tags,tags.tags,stores"
    assert fallback.paths(DEALS) == "tags,stores"
    assert fallback.paths(DEALS, "images.tags,,stores") == "stores"
    # another route's refusals do not apply
    assert fallback.paths(TYPES["events"]) == TYPES["events"].include


def test_only_a_listing_with_include_gets_the_small_5xx_allowance() -> None:
    assert IncludeFallback.attempts({"include": "tags"}) == INCLUDE_ATTEMPTS
    assert IncludeFallback.attempts({"include": "tags"}, refusals=False) is None
    assert IncludeFallback.attempts({"sort": "id"}) is None


def test_failing_is_an_include_listing_out_of_its_5xx_allowance() -> None:
    spent = RetriesExhaustedError("5xx", url="u", status=502)
    assert IncludeFallback.failing(spent, {"include": "tags"})
    assert not IncludeFallback.failing(spent, {"sort": "id"})
    assert not IncludeFallback.failing(RetriesExhaustedError("429s", status=429), {"include": "t"})
    assert not IncludeFallback.failing(RetriesExhaustedError("timeouts"), {"include": "t"})
    assert not IncludeFallback.failing(UpstreamError("5xx", status=503), {"include": "t"})


async def test_a_400_about_something_else_probes_nothing() -> None:
    fallback = IncludeFallback(_Client(None))  # type: ignore[arg-type]
    scope = Scope(DEALS)
    about_size = UpstreamError("page[size] too large", url="u", status=400)
    assert not await fallback.refused(about_size, scope, {"include": "tags"})
    about_include = UpstreamError("invalid include path", url="u", status=400)
    assert not await fallback.refused(about_include, scope, {"sort": "id"})
    assert not await fallback.refused(UpstreamError("nope", status=404), scope, {"include": "x"})


async def test_a_refusal_found_by_a_listing_beside_this_one_is_not_asked_again() -> None:
    fallback = IncludeFallback(_Client(_refusing("tags")))  # type: ignore[arg-type]
    refusal = UpstreamError("Invalid include: tags", url="u", status=400)
    assert await fallback.refused(refusal, Scope(DEALS), {"include": "images,tags"})
    assert set(fallback.locks) == {"/deals"}
