"""Every exception `sync` raises on purpose, in one tree.

    SyncError                      base; `str(err)` is one line naming the problem and the fix
    ├── ConfigError                a setting is missing or wrong (CLI exit code 2)
    ├── MirrorError                the mirror (SQLite file, PostgreSQL schema) cannot be opened, is
    │                              corrupt, locked or read-only
    │   └── StorageFault           it cannot take writes now: disk full, read-only, locked too long
    │                              (a one-shot command exits 4; the daemon degrades and resumes)
    ├── Interrupted                SIGTERM/SIGINT stopped a one-shot command (exit 128 + signal)
    └── UpstreamError              talking to the Channel Content API failed; carries url, status, hint
        ├── AuthError              login refused, or 401 after `RELOGINS` fresh logins
        │   └── LoginRefusedError  the credentials themselves refused (a setting to fix; the
        │                          daemon exits on it, it retries every other upstream error)
        ├── ForbiddenError         the account may not read this type (403); reported and skipped
        ├── NotFoundError          404 for a route or id
        ├── ListingMissingError    a mall's listing answers 404 while `GET /malls/{id}` serves
        │                          the mall: a failure of that scope, never a deletion
        ├── ListingUnsettledError  a listing kept changing under every walk (rows left it while
        │                          read): no whole list, never a deletion
        ├── NoProgressError        a walk's answer brought nothing it did not hold (a page served
        │                          again): the walk ends there (`sync.channel.paging`), never a
        │                          deletion, and health names the listing
        ├── BadResponseError       the body is not the JSON:API document the spec promises
        ├── InvalidParametersError 422 from the management API, with every entry of `details`
        ├── RetriesExhaustedError  5xx/429/timeouts went on past the retry budget
        ├── MaybeAppliedError      a request that must not be repeated blind (POST /webhooks)
        │                          met a 5xx or a timeout: it may or may not have taken effect
        └── UnreachableError       no connection at all before any answer: refused, DNS, TLS
                                   (a one-shot command exits 3; the daemon logs and retries)

Errors never carry secrets: URLs are stripped of the `auth_*` query parameters before they are
stored here (see `redact_url`), and every message and hint goes through `sync.core.redact`.
"""

from __future__ import annotations

import signal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sync.core.redact import redact_text

_SECRET_PARAMS = frozenset({"auth_token", "auth_id", "auth_timestamp", "password", "token"})


def redact_url(url: str) -> str:
    """Return `url` with every authentication query parameter (and a password in the
    authority, `https://user:secret@host`) replaced by `***`."""
    url = redact_text(url)
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}:***@{host}")
        url = urlunsplit(parts)
    if not parts.query:
        return url
    query = [
        (k, "***" if k in _SECRET_PARAMS else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query, safe="[],*")))


class SyncError(Exception):
    """Base class: a failure `sync` understands and can explain in one line."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # An upstream's error detail, an aiohttp message: they may quote what carries a secret.
        message = redact_text(message)
        hint = None if hint is None else redact_text(hint)
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ConfigError(SyncError):
    """A configuration key is missing or invalid; the message names the key and the fix."""


class MirrorError(SyncError):
    """The mirror database cannot be used as it is (corrupt, locked, read-only, wrong schema)."""


class MirrorRefused(MirrorError):
    """The PostgreSQL server refused the mirror for a reason a setting fixes: a URL that does
    not parse, a password or role refused, a right missing, a database that does not exist, a
    schema another program owns, a server too old. The daemon exits on it (as on
    `LoginRefusedError`); an unreachable server, or a replica during a failover, it retries."""


class StorageFault(MirrorError):
    """The mirror cannot take writes now, for a reason outside sync that someone can fix: its
    file system is full (`disk_full`), the file, its directory or its file system does not
    take writes (`read_only`), or another program held its write lock for too long (`locked`).

    `str(fault)` is `<file>: <cause>; <fix>`. Nothing committed is lost: a one-shot command
    exits 4 and its next run goes on; the daemon reports itself degraded and resumes by itself
    once a write succeeds again (`sync.store.watch`).
    """

    def __init__(self, reason: str, path: str, cause: str, fix: str) -> None:
        self.reason = reason
        self.path = path
        self.cause = cause
        self.fix = fix
        super().__init__(f"{path}: {cause}", hint=fix)

    def __str__(self) -> str:
        return f"{self.path}: {self.cause}; {self.fix}"


class UpstreamError(SyncError):
    """A request to the upstream failed; carries the (redacted) URL and the HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        status: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.url = redact_url(url) if url else None
        self.status = status
        where = f" [{status} {self.url}]" if status is not None and self.url else ""
        super().__init__(f"{message}{where}", hint=hint)


class AuthError(UpstreamError):
    """Login failed, or the upstream keeps answering 401 after a fresh login."""


class LoginRefusedError(AuthError):
    """`POST /accounts/login` refused the credentials (401, 403, 422): a setting to fix, which
    no retry cures."""


class ForbiddenError(UpstreamError):
    """The account's channels do not allow this type; the type is skipped, never fatal."""


class NotFoundError(UpstreamError):
    """The upstream answered 404."""


class ListingMissingError(UpstreamError):
    """A listing of a mall (`/malls/{id}/<type>`) answered 404 on a page it promised while
    `GET /malls/{id}` still serves the mall: the listing failed, the mall is not gone."""


class ListingUnsettledError(UpstreamError):
    """A listing shrank under each walk of it (a promised page went): no whole list was read,
    and nothing may be inferred from what it lacked."""


class NoProgressError(UpstreamError):
    """A walk of a listing asked a page that brought nothing the walk had not already read (the
    upstream served the same rows again: it ignored `page[number]` or the filter asked): the
    walk ends there instead of looping (`sync.channel.paging`), and no row may be inferred gone
    from what it did not reach."""


class BadResponseError(UpstreamError):
    """The upstream's body is not valid JSON or not a JSON:API document of the expected shape."""


class InvalidParametersError(UpstreamError):
    """422 from the management API; the message lists every entry of its `details`."""

    def __init__(self, error: str, *, details: dict[str, object], url: str | None = None) -> None:
        self.details = details
        lines = [f"{key}: {value}" for key, value in details.items()]
        super().__init__(f"{error}: " + "; ".join(lines) if lines else error, url=url, status=422)


class RetriesExhaustedError(UpstreamError):
    """Transient failures (5xx, 429, timeouts, dropped connections) outlasted the retry budget."""


class MaybeAppliedError(UpstreamError):
    """A request sent once (`Transport.send(once=True)`) met a 5xx, a timeout or a dropped
    connection: the upstream may have applied it. The caller finds out (a subscription is
    looked for in `GET /webhooks`) before it sends it again."""


class UnreachableError(UpstreamError):
    """The upstream could not be reached at all (connection refused, DNS failure, TLS error)
    before it ever answered: a wrong `base_url`, a firewall or a certificate, which retries
    cannot cure. The message names the URL, the hint the setting to check."""


class Interrupted(SyncError):
    """A one-shot command was stopped by a signal; the CLI exits with 128 + `signum`."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
