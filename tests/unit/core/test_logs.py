"""sync.core.logs: the `redact` processor, the standard library bridge's levels, and `reset`."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from sync.core import logs


def test_redact_masks_credential_keys_whatever_their_case_and_urls_by_parameter() -> None:
    event: dict[str, Any] = {
        "event": "login",
        "Password": "hunter2",
        "authorization": "Bearer x",
        "url": "http://h/deals?auth_token=abc&page=2",
        "count": 3,
    }
    assert logs.redact(None, "info", event) == {
        "event": "login",
        "Password": "***",
        "authorization": "***",
        "url": "http://h/deals?auth_token=***&page=2",
        "count": 3,
    }


def test_redact_walks_nested_values_and_exceptions() -> None:
    event: dict[str, Any] = {
        "event": "e",
        "nested": ({"p": "/webhooks/abcdef"},),
        "error": ValueError("GET /webhooks/abcdef failed"),
    }
    assert logs.redact(None, "error", event) == {
        "event": "e",
        "nested": [{"p": "/webhooks/***"}],
        "error": "GET /webhooks/*** failed",
    }


def test_quiet_loggers_are_lowered_to_debug_below_error() -> None:
    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "m", None, None)

    assert logs._level(record("apscheduler.scheduler", logging.INFO)) == logging.DEBUG
    assert logs._level(record("apscheduler", logging.WARNING)) == logging.DEBUG
    assert logs._level(record("apscheduler", logging.ERROR)) == logging.ERROR
    assert logs._level(record("aiohttp.server", logging.INFO)) == logging.INFO


def test_the_bridge_folds_a_standard_library_record_onto_one_redacted_line() -> None:
    logs.configure("debug", "json")
    try:
        with structlog.testing.capture_logs() as captured:
            try:
                raise RuntimeError("bad\n request /webhooks/zzzzzz")
            except RuntimeError:
                logging.getLogger("aiohttp.server").exception("Error handling\n  request")
    finally:
        logs.reset()
    assert captured == [
        {
            "event": "Error handling request",
            "error": "RuntimeError: bad request /webhooks/***",
            "logger_name": "aiohttp.server",
            "log_level": "error",
        }
    ]


def test_reset_undoes_configure() -> None:
    logs.configure("info", "json")
    assert any(isinstance(h, logs._Bridge) for h in logging.getLogger().handlers)
    assert sys.excepthook is not sys.__excepthook__
    logs.reset()
    assert not any(isinstance(h, logs._Bridge) for h in logging.getLogger().handlers)
    assert logging.getLogger().level == logging.WARNING
    assert sys.excepthook is sys.__excepthook__
