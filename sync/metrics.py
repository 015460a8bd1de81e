"""Prometheus metrics of the daemon, served at GET /metrics.

Uses `prometheus_client` (the reference implementation of the exposition format) with a registry
per `Metrics` object, so tests can create as many daemons as they like.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    """Rows per type, queue depth, upstream requests and errors, notices, lag, job runs,
    verify repairs."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rows = Gauge("sync_rows", "Rows in the mirror per type", ["type"], registry=r)
        self.queue_depth = Gauge(
            "sync_queue_depth", "Webhook notices waiting in the queue", registry=r
        )
        self.requests = Counter(
            "sync_upstream_requests", "Upstream responses by status", ["status"], registry=r
        )
        self.errors = Counter("sync_errors", "Errors by kind", ["kind"], registry=r)
        self.notices = Counter(
            "sync_webhook_notices", "Webhook bodies by outcome", ["outcome"], registry=r
        )
        self.notice_items_invalid = Counter(
            "sync_webhook_items_invalid",
            "Off-spec items left out of otherwise valid notice batches",
            registry=r,
        )
        self.lag_seconds = Gauge(
            "sync_lag_seconds",
            "Seconds since the last successful sync per type",
            ["type"],
            registry=r,
        )
        self.verify_repairs = Counter(
            "sync_verify_repairs",
            "Rows the verify repaired (content changed upstream without a new updated_at)",
            ["type"],
            registry=r,
        )
        self.job_runs = Counter(
            "sync_job_runs", "Scheduled job runs by job and outcome", ["job", "outcome"], registry=r
        )

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
