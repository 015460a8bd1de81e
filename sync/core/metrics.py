"""Prometheus metrics of the daemon, served at GET /metrics.

Uses `prometheus_client` (the reference implementation of the exposition format) with a registry
per `Metrics` object, so tests can create as many daemons as they like. What describes the
mirror's state now (lag, rows, queue depth, upstream answers) is computed when Prometheus
scrapes, by a collector reading the daemon (`Live`), so it is never stale between jobs and
counts the first backfill's requests; events (notices, job runs, errors) are counters bumped
where they happen. The standard process, platform and GC collectors are registered too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Live(Protocol):
    """What the scrape-time collector reads (the daemon implements it)."""

    def lag_seconds(self) -> Mapping[str, float]:
        """Seconds since the last successful sync, per mirrored type."""

    def rows(self) -> Mapping[str, int]:
        """Rows in the mirror, per mirrored type."""

    def queue_depth(self) -> int:
        """Webhook notices waiting in the durable queue."""

    def upstream_statuses(self) -> Mapping[int, int]:
        """Upstream answers so far by HTTP status (totals since the process started)."""

    def budget(self) -> Mapping[str, float | int]:
        """The request budget's `snapshot()` (empty when there is none)."""


#: The request budget's metrics: (family, name suffix, help, key of `RequestBudget.snapshot`).
_BUDGET: tuple[tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, str, str], ...] = (
    (GaugeMetricFamily, "max", "Configured requests per second", "max_rate"),
    (
        GaugeMetricFamily,
        "rate",
        "Requests per second allowed now (lowered for a while by 429s)",
        "rate",
    ),
    (GaugeMetricFamily, "waiting", "Requests waiting for a slot", "waiting"),
    (CounterMetricFamily, "throttled", "429 answers that lowered the budget", "throttled"),
    (
        CounterMetricFamily,
        "wait_seconds",
        "Seconds requests spent waiting for a slot, summed",
        "waited_s",
    ),
)


class _LiveCollector(Collector):
    def __init__(self, live: Live) -> None:
        self.live = live

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "sync_lag_seconds", "Seconds since the last successful sync per type", labels=["type"]
        )
        for name, seconds in sorted(self.live.lag_seconds().items()):
            lag.add_metric([name], seconds)
        yield lag
        rows = GaugeMetricFamily("sync_rows", "Rows in the mirror per type", labels=["type"])
        for name, n in sorted(self.live.rows().items()):
            rows.add_metric([name], n)
        yield rows
        yield GaugeMetricFamily(
            "sync_queue_depth",
            "Webhook notices waiting in the queue",
            value=self.live.queue_depth(),
        )
        requests = CounterMetricFamily(
            "sync_upstream_requests", "Upstream responses by status", labels=["status"]
        )
        for status, n in sorted(self.live.upstream_statuses().items()):
            requests.add_metric([str(status)], n)
        yield requests
        b = self.live.budget()
        if b:
            for family, name, help_text, key in _BUDGET:
                yield family(f"sync_request_budget_{name}", help_text, value=b[key])
        yield from self._proof()

    def _proof(self) -> Iterator[Metric]:
        # Optional in `Live` (a receiver alone has no proof): read when the daemon offers it.
        proof = getattr(self.live, "proof", None)
        ages, unresolved = proof() if proof is not None else ({}, {})
        age = GaugeMetricFamily(
            "sync_proven_age_seconds",
            "Seconds since each type was last proven complete by the rolling proof (every "
            "scope's ids and stamps compared with the mirror, nothing unresolved)",
            labels=["type"],
        )
        for name, seconds in sorted(ages.items()):
            age.add_metric([name], seconds)
        yield age
        rows = GaugeMetricFamily(
            "sync_proof_unresolved_rows",
            "Rows the last proof of each type left unresolved (absent from a listing, their "
            "deletion not confirmed: the mass-delete guard's case)",
            labels=["type"],
        )
        for name, n in sorted(unresolved.items()):
            rows.add_metric([name], n)
        yield rows


class Metrics:
    """Notices, job runs, errors, verify repairs, per-type errors, misfit values (counters);
    storage and per-type fault states (gauges set on change); lag, rows, queue depth and upstream
    answers read at scrape time from `live`; process, platform and GC metrics."""

    def __init__(self, live: Live | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        if live is not None:
            self.watch(live)
        self.errors = Counter("sync_errors", "Errors by kind", ["kind"], registry=r)
        self.no_progress = Counter(
            "sync_walks_no_progress",
            "Polls whose walk ended on the progress rule (the upstream served again what the "
            "walk held), per type or `deletions`",
            ["listing"],
            registry=r,
        )
        self.notices = Counter(
            "sync_webhook_notices", "Webhook bodies by outcome", ["outcome"], registry=r
        )
        self.notice_items_invalid = Counter(
            "sync_webhook_items_invalid",
            "Off-spec items left out of otherwise valid notice batches",
            registry=r,
        )
        self.verify_repairs = Counter(
            "sync_verify_repairs",
            "Rows the verify repaired (content changed upstream without a new updated_at)",
            ["type"],
            registry=r,
        )
        self.repairs = Counter(
            "sync_repairs",
            "Rows the proof and the verify repaired, by type and kind (missed_change, "
            "missed_creation, missed_deletion, same_stamp_content, membership): what the "
            "notices and polls missed",
            ["type", "kind"],
            registry=r,
        )
        self.change_lag = Histogram(
            "sync_change_lag_seconds",
            "Seconds from a change's updated_at (upstream clock) to its commit in the mirror, "
            "by type and path (notice, poll, proof)",
            ["type", "path"],
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
            registry=r,
        )
        self.values = Counter(
            "sync_values",
            "Values that did not fit their declared column type, by type and outcome (refused: "
            "the row kept its last good copy; coerced: converted losslessly)",
            ["type", "outcome"],
            registry=r,
        )
        self.feed_unknown_types = Counter(
            "sync_feed_unknown_types",
            "Deletions feed entries skipped because their resource_type maps to no type",
            ["resource_type"],
            registry=r,
        )
        self.job_runs = Counter(
            "sync_job_runs", "Scheduled job runs by job and outcome", ["job", "outcome"], registry=r
        )
        # Set where states change (`sync.store.watch`, `sync.jobs.typefaults`): a transition is an event.
        self.degraded = Gauge(
            "sync_degraded",
            "1 while the mirror cannot take writes, by reason (disk_full, read_only, locked)",
            ["reason"],
            registry=r,
        )
        self.late_arrivals = Counter(
            "sync_late_arrivals",
            "Rows (and feed entries, type deletions) that committed after a poll had read past "
            "their stamp (`sync.jobs.incremental.lateness`)",
            ["type"],
            registry=r,
        )
        self.poll_lookback = Gauge(
            "sync_poll_lookback_seconds",
            "Seconds each poll of the type re-reads behind its cursor, learned from lateness",
            ["type"],
            registry=r,
        )
        self.type_errors = Counter(
            "sync_type_errors",
            "Failed attempts per type (bad answers, retries spent); other types go on",
            ["type"],
            registry=r,
        )
        self.type_failures = Gauge(
            "sync_type_failures",
            "Failures in a row per type, backing it off (0 once it succeeds again)",
            ["type"],
            registry=r,
        )

    def lateness(self, type_name: str, late: int, lookback: float) -> None:
        """After a poll (`sync.jobs.incremental.poll.Poller`): its late arrivals and the type's lookback."""
        if late:
            self.late_arrivals.labels(type=type_name).inc(late)
        self.poll_lookback.labels(type=type_name).set(lookback)

    def watch(self, live: Live) -> None:
        """Read `live` at every scrape from now on: for a reader built after the metrics (the
        daemon's, once its mirror is open and its client connected)."""
        self.registry.register(_LiveCollector(live))

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
