"""sync.core.metrics: the scrape-time figures read from a `Live`, and the lateness counters."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from sync.core.metrics import Metrics


class _Live:
    """A daemon's figures, fixed."""

    def __init__(self, budget: Mapping[str, float | int]) -> None:
        self._budget = budget

    def lag_seconds(self) -> Mapping[str, float]:
        return {"shops": 2.5, "deals": 1.0}

    def rows(self) -> Mapping[str, int]:
        return {"deals": 7}

    def queue_depth(self) -> int:
        return 4

    def upstream_statuses(self) -> Mapping[int, int]:
        return {200: 9, 429: 1}

    def budget(self) -> Mapping[str, float | int]:
        return self._budget

    def proof(self) -> tuple[dict[str, float], dict[str, int]]:
        return {"deals": 30.0}, {"deals": 2}


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name.startswith("sync_")
    }


def test_the_live_figures_are_read_at_scrape_time() -> None:
    live = _Live({})
    samples = _samples(Metrics(live))
    assert samples[("sync_lag_seconds", (("type", "shops"),))] == 2.5
    assert samples[("sync_rows", (("type", "deals"),))] == 7
    assert samples[("sync_queue_depth", ())] == 4
    assert samples[("sync_upstream_requests_total", (("status", "429"),))] == 1
    assert samples[("sync_proven_age_seconds", (("type", "deals"),))] == 30.0
    assert samples[("sync_proof_unresolved_rows", (("type", "deals"),))] == 2
    # no budget: none of its metrics
    assert not [k for k in samples if k[0].startswith("sync_request_budget")]


def test_the_budget_snapshot_becomes_its_metrics() -> None:
    snapshot = {"max_rate": 20, "rate": 10.0, "waiting": 3, "throttled": 2, "waited_s": 1.5}
    samples = _samples(Metrics(_Live(snapshot)))
    assert samples[("sync_request_budget_max", ())] == 20
    assert samples[("sync_request_budget_rate", ())] == 10.0
    assert samples[("sync_request_budget_waiting", ())] == 3
    assert samples[("sync_request_budget_throttled_total", ())] == 2
    assert samples[("sync_request_budget_wait_seconds_total", ())] == 1.5


def test_lateness_counts_late_rows_and_sets_the_lookback() -> None:
    metrics = Metrics()
    metrics.lateness("deals", 0, 5.0)
    metrics.lateness("deals", 3, 42.0)
    samples = _samples(metrics)
    assert samples[("sync_late_arrivals_total", (("type", "deals"),))] == 3
    assert samples[("sync_poll_lookback_seconds", (("type", "deals"),))] == 42.0
    # no live reader yet: no scrape-time figures
    assert ("sync_queue_depth", ()) not in samples
