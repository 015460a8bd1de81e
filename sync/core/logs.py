"""Structured logging: structlog, human-readable on a terminal, JSON lines otherwise (journald).

Secrets never reach a log line: the `redact` processor masks any value under a key that names a
credential, logs URLs through `errors.redact_url`, and runs every other text, exceptions
included, through `sync.core.redact`. Lines logged through the standard library (aiohttp's server,
asyncio, APScheduler) are bridged into the same pipeline, one line each (APScheduler's own at
`debug`: `QUIET_LOGGERS`): aiohttp's HTTP parser
quotes a malformed request's first line, callback secret and all, in its error. A crash's
traceback is printed redacted too.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import MutableMapping
from types import TracebackType
from typing import Any

import structlog

from sync.core.errors import redact_url
from sync.core.redact import redact_text

_SECRET_KEYS = frozenset(
    {"password", "auth_token", "authentication_token", "token", "secret", "authorization"}
)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: mask credential-named keys, auth query parameters in URLs, and
    secrets anywhere in any text (`sync.core.redact`)."""
    for key in list(event):
        value = event[key]
        if key.lower() in _SECRET_KEYS:
            event[key] = "***"
        elif key in ("url", "path") and isinstance(value, str):
            event[key] = redact_url(value)
        else:
            event[key] = _redacted(value)
    return event


def _redacted(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if depth > 3:
        return value
    if isinstance(value, dict):
        return {k: _redacted(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, depth + 1) for v in value]
    if isinstance(value, BaseException):
        return redact_text(str(value))
    return value


class _Bridge(logging.Handler):
    """The standard library's log records as structlog events: one line each (an exception
    as `error`, its type and message folded onto that line), redacted like any other."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {}
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                fields["error"] = redact_text(" ".join(f"{type(exc).__name__}: {exc}".split()))
            # Redacted here too, not only by `redact`: a test's `capture_logs` skips processors.
            event = redact_text(" ".join(record.getMessage().split()))
            structlog.get_logger(logger_name=record.name).log(_level(record), event, **fields)
        except Exception:  # a log line must never take the process down
            self.handleError(record)


#: Loggers whose lines below ERROR are the scheduler's own bookkeeping ("Adding job
#: tentatively", "Running job", "Job executed successfully", a run skipped while the last one
#: runs): shown at `debug` only. Each job run has its own line (`job.done`, `sync.daemon.runs`).
QUIET_LOGGERS = ("apscheduler",)


def _level(record: logging.LogRecord) -> int:
    """The level a standard library record is logged at (`QUIET_LOGGERS` lowered to debug)."""
    quiet = record.name.split(".")[0] in QUIET_LOGGERS
    return logging.DEBUG if quiet and record.levelno < logging.ERROR else record.levelno


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
            structlog.processors.format_exc_info,  # before `redact`: a traceback is text too
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    reset()
    root = logging.getLogger()
    root.addHandler(_Bridge())
    root.setLevel(logging.getLevelNamesMapping()[level.upper()])
    sys.excepthook = _excepthook


def _excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """A crash's traceback as Python prints it, redacted: an exception's message may quote a
    URL with its signature, or a request line with the callback secret."""
    sys.stderr.write(redact_text("".join(traceback.format_exception(kind, exc, tb))))


def reset() -> None:
    """Undo `configure`'s hold on the standard library's logging (a test process runs many
    commands in turn)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Bridge)]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    sys.excepthook = sys.__excepthook__


def get_logger(name: str) -> Any:
    """A bound logger carrying `logger_name=<name>`."""
    return structlog.get_logger(logger_name=name)
