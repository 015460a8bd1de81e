"""What must never be shown, and `redact_text`, which every sink of text runs.

The sinks: every log line (`sync.core.logs`: structlog events and, bridged into them, the standard
library's loggers, aiohttp's server among them), every error (`sync.core.errors.SyncError`), and
what `ccsync status` and `/healthz` show, which comes from errors stored in the mirror. Two
nets, since neither alone is enough:

- the secrets themselves: the configuration registers the upstream password, the webhook
  secret and the management tokens as it reads them, and the client each session token it is
  given (`register`); any text holding one is masked, whatever carries it (an HTTP parser's
  message quoting the request line, an upstream error echoing a body, a traceback);
- where secrets go, whatever their value: the callback path `/webhooks/<secret>` (the secret
  of another configuration, a guess) and the `auth_*`, `password` and `token` parameters
  (a request's `auth_token` is a new signature each time: no registry could hold it).

No imports from the rest of `sync`: `errors` and `logs` build on it.
"""

from __future__ import annotations

import re

#: Registered values shorter than this are not masked: they would mask ordinary words.
MIN_CHARS = 6

_SECRETS: set[str] = set()
_ORDERED: list[str] = []  # `_SECRETS`, longest first
#: A callback path's secret segment (an upstream webhook id is numeric, and is kept).
_WEBHOOK_PATH = re.compile(r"/webhooks/(?!\d+(?:[/?#\s'\"\\]|$))[^/?#\s'\"\\]+")
#: Auth parameters in a query string, and credential members of a JSON text.
#: A value masked already (`***` then a delimiter, `]` among them) is left as it is: masking
#: it again would eat the `]` that closes an error's `[404 <url>]`.
_PARAMS = re.compile(
    r"\b(auth_token|auth_id|auth_timestamp|authentication_token|password|token)="
    r"(?:\*\*\*(?![^&\s'\"\\\]])|[^&\s'\"\\]*)"
)
_MEMBERS = re.compile(
    r"(\"(?:auth_token|authentication_token|password|token|secret|bearer_token|client_token)\""
    r"\s*:\s*)\"(?:[^\"\\]|\\.)*\""
)


def register(value: str | None) -> None:
    """Mask `value` wherever it appears from now on (in this process)."""
    if value and len(value) >= MIN_CHARS and value not in _SECRETS:
        _SECRETS.add(value)
        # Longest first: a secret that holds a shorter one (a token `u1-session-token-2` and a
        # `token-2`) is masked whole, not left with the rest of it showing around a `***`.
        _ORDERED[:] = sorted(_SECRETS, key=len, reverse=True)


def redact_text(text: str) -> str:
    """`text` with every registered secret, callback path secret and auth parameter masked."""
    for secret in _ORDERED:
        if secret in text:
            text = text.replace(secret, "***")
    if "/webhooks/" in text:
        text = _WEBHOOK_PATH.sub("/webhooks/***", text)
    if "=" in text:
        text = _PARAMS.sub(r"\1=***", text)
    if '"' in text:
        text = _MEMBERS.sub(r'\1"***"', text)
    return text
