"""Structured logging: structlog, human-readable on a terminal, JSON lines otherwise (journald).

Secrets never reach a log line: the `redact` processor masks any value under a key that names a
credential, and URLs are logged through `errors.redact_url`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from sync.errors import redact_url

_SECRET_KEYS = frozenset(
    {"password", "auth_token", "authentication_token", "token", "secret", "authorization"}
)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: mask credential-named keys and auth query parameters in URLs."""
    for key in list(event):
        if key.lower() in _SECRET_KEYS:
            event[key] = "***"
        elif key in ("url", "path") and isinstance(event[key], str):
            event[key] = redact_url(event[key])
    return event


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Set up structlog for the process; `fmt` is auto, console or json."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if use_console
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A bound logger carrying `logger_name=<name>`."""
    return structlog.get_logger(logger_name=name)
