"""sync.daemon.state: SyncState's start, last sync per type by the clock, skipped types."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from sync.daemon import state as state_module
from sync.daemon.state import SyncState
from sync.model import catalogue

TYPES = [catalogue.TYPES["deals"], catalogue.TYPES["stores"]]


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The module's monotonic clock (its own `time` only: the test runner keeps the real one)."""
    readings = [100.0, 105.5, 110.0]
    clock = iter(readings)
    monkeypatch.setattr(state_module, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    yield readings


def test_a_new_state_starts_now_not_ready_with_nothing_synced(ticks: list[float]) -> None:
    state = SyncState(TYPES)
    assert state.started == 100.0 and state.last_ok == {} and state.ready is False
    assert state.types == TYPES and state.types is not TYPES  # its own list


def test_a_sync_is_stamped_by_the_clock_and_a_skip_forgets_it(ticks: list[float]) -> None:
    state = SyncState(TYPES)
    state.synced("deals")
    state.synced("stores")
    assert state.last_ok == {"deals": 105.5, "stores": 110.0}
    state.skipped("stores")  # not readable by this account: health no longer ages it
    state.skipped("never-synced")  # nothing to forget: no error
    assert state.last_ok == {"deals": 105.5}
