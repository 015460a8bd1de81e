"""sync.daemon.state: SyncState records each type's last sync by the monotonic clock, and forgets a skipped one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sync.daemon import state as state_module
from sync.daemon.state import SyncState
from sync.model import catalogue


def test_a_sync_is_stamped_by_the_monotonic_clock_and_a_skip_forgets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([100.0, 105.5, 110.0])
    # The module's own `time` only: the test runner keeps the real clock.
    monkeypatch.setattr(state_module, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    types = [catalogue.TYPES["deals"], catalogue.TYPES["stores"]]
    state = SyncState(types)
    assert state.started == 100.0 and state.types == types and state.types is not types
    assert state.last_ok == {} and state.ready is False
    state.synced("deals")
    state.synced("stores")
    assert state.last_ok == {"deals": 105.5, "stores": 110.0}
    state.skipped("stores")
    state.skipped("never-synced")  # nothing to forget: no error
    assert state.last_ok == {"deals": 105.5}
