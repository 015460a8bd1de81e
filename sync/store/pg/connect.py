"""Connecting to the PostgreSQL mirror, and every way that can fail said in one line.

Issue #49: `connect(url, schema, readonly=...)` is the one place the PostgreSQL store makes a
data connection; the active lock (`sync.store.pg.lock`) makes its own through `conninfo` and
`check_server`. Each failure is a `MirrorError` of one line naming `[mirror] url` or
`[mirror] schema` and the fix:

- a URL that does not parse, or a server that cannot be reached or refuses the role;
- a server older than `MIN_SERVER` (see there for why 12);
- a writer on a read-only server (a replica in recovery, or `default_transaction_read_only`);
- a role without the rights it needs: a writer, CREATE on the database when the schema is
  absent (it creates it), else USAGE and CREATE on the schema and ownership of its tables (the
  page write adds columns and indexes as the upstream grows, which only an owner may); a
  reader, USAGE on the schema and SELECT on its tables;
- a schema another program owns: it has tables but no `_sync_meta`, the marker every mirror
  has (`sync.store.pg.bookkeeping`); a mirror never writes among another program's tables;
- a reader given a schema with no mirror in it.

**The connection** is in autocommit (callers group statements in `with conn.transaction():`),
named `ccsync@<hostname>:<pid>` in `pg_stat_activity` (`application_name`), gives up
connecting after `CONNECT_TIMEOUT` seconds and has TCP keepalives on, so a dead server is
found by a quiet connection too. A reader's session is read-only
(`default_transaction_read_only`), as the SQLite reader opens its file `mode=ro`. The
password may also come from libpq's `PGPASSWORD` or `~/.pgpass`: nothing here reads them.

**Never the password.** A target is described from its parsed host, port, database and user
(`target`), and every spelling of the password the URL holds is masked (`masked`) in any text
quoted from libpq or the server.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sync.core.errors import MirrorError, MirrorRefused

#: The oldest server the store runs on, as `server_version_num`. 12, because the active lock's
#: takeover within 30 s of a dead host counts on the server-side `tcp_user_timeout` (new in 12,
#: `sync.store.pg.lock`); below that the store would still run (`EXECUTE FUNCTION` in the change
#: feed's triggers needs 11, identity columns 10) but the lock would not keep its promise.
#: Nothing used needs 13 or later (no MERGE, no `NULLS NOT DISTINCT`, no SQL/JSON functions).
MIN_SERVER: Final = 120000
#: Seconds to wait for a connection to be made.
CONNECT_TIMEOUT = 10
#: libpq's TCP keepalives on a data connection (idle, interval, count; seconds).
KEEPALIVE: Final = (4, 2, 3)
#: PostgreSQL's longest `application_name`, in bytes (NAMEDATALEN - 1).
MAX_NAME = 63
#: The table every mirror has; a schema with tables but without it belongs to someone else.
MARKER = "_sync_meta"

#: What libpq puts before the reason a connection failed (once per host it tried).
_FAILED = re.compile(
    r"^connection failed:\s*"
    r'|connection to server (?:at|on) "[^"]*"(?:, port \d+)? failed:\s*'
)
#: A password in a conninfo string or URL that libpq could not parse.
_PASSWORD_WORD = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")

#: One round trip telling whether the server takes writes.
_WRITABLE = "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')"
#: One round trip telling what the role may do with the schema and what the schema holds.
_SCHEMA = """
    SELECT current_user,
        n.oid IS NOT NULL,
        has_database_privilege(current_database(), 'CREATE'),
        n.oid IS NOT NULL AND has_schema_privilege(n.oid, 'USAGE'),
        n.oid IS NOT NULL AND has_schema_privilege(n.oid, 'CREATE'),
        EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm')),
        EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                WHERE c.relnamespace = n.oid AND c.relname = %(marker)s
                AND c.relkind IN ('r', 'p')),
        (SELECT min(c.relname) FROM pg_catalog.pg_class c
         WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm')
         AND NOT has_table_privilege(c.oid, 'SELECT')),
        (SELECT min(c.relname) FROM pg_catalog.pg_class c
         WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p')
         AND NOT pg_has_role(c.relowner, 'USAGE'))
    FROM (SELECT %(schema)s::name AS name) s
    LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = s.name
"""


def application_name() -> str:
    """`ccsync@<hostname>:<pid>`, what `pg_stat_activity` shows for our sessions, clipped to
    what the server keeps (the pid kept whole)."""
    tail = f":{os.getpid()}"
    host = socket.gethostname().encode("ascii", "replace")[: MAX_NAME - len(tail) - 7]
    return f"ccsync@{host.decode('ascii')}{tail}"


def passwords(dsn: str) -> list[str]:
    """Every spelling of a password `dsn` holds (as written and decoded), longest first."""
    found: set[str] = set()
    with contextlib.suppress(psycopg.Error):
        password = conninfo_to_dict(dsn).get("password")
        if password:
            found.add(str(password))
    for m in _PASSWORD_WORD.finditer(dsn):
        found.add(m.group(1).strip("'"))
    with contextlib.suppress(ValueError):
        raw = urlsplit(dsn).netloc.rpartition("@")[0].partition(":")[2]
        if raw:
            found |= {raw, unquote(raw)}
    return sorted((p for p in found if p), key=len, reverse=True)


def masked(text: str, dsn: str) -> str:
    """`text` with every password of `dsn` replaced by `***`."""
    for password in passwords(dsn):
        text = text.replace(password, "***")
    return text


def target(dsn: str) -> str:
    """`user@host:port/dbname` of `dsn`, for messages: built from its parts, so no password
    (libpq's defaults, the environment's, are not filled in: what is not written is left out)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(a URL that does not parse)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    where = str(parts.get("host") or parts.get("hostaddr") or "")
    where += f":{parts['port']}" if parts.get("port") else ""
    db = f"/{parts['dbname']}" if parts.get("dbname") else ""
    return f"{user}{where}{db}" or "(libpq defaults)"


def reason(message: str) -> str:
    """libpq's or the server's message on one line, without its `connection failed: connection
    to server at ... failed:` preamble (the target is named apart) or its level prefixes."""
    text = _FAILED.sub("", message.strip())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Is the server running")]
    cleaned = [re.sub(r"^(FATAL|ERROR|DETAIL|HINT):\s+", "", ln) for ln in lines]
    return "; ".join(cleaned) or "(no message)"


def error(dsn: str, message: str, hint: str, *, setting: bool = False) -> MirrorError:
    """A MirrorError with every password of `dsn` masked (in a reason quoted from the server,
    or a user named as its own password); a `MirrorRefused` when a `setting` is the fix (the
    daemon exits on it rather than asking again)."""
    kind = MirrorRefused if setting else MirrorError
    return kind(masked(message, dsn), hint=masked(hint, dsn))


def role(dsn: str, user: str | None = None) -> str:
    """`role <name>` for messages: `user` (the server's `current_user`) or the URL's."""
    if user is None:
        with contextlib.suppress(psycopg.Error):
            given = conninfo_to_dict(dsn).get("user")
            user = str(given) if given else None
    return f"role {user}" if user else "the role of [mirror] url"


def refused(dsn: str, what: str, exc: psycopg.Error | None, grant: str) -> MirrorError:
    """One line for a role without a right: `what` it may not do, the server's reason, and
    `grant`, the fix."""
    why = f" ({reason(str(exc))})" if exc is not None else ""
    return error(
        dsn,
        f"PostgreSQL mirror {target(dsn)}: {role(dsn)} {what}{why}",
        f"{grant}, or name a role that has them in [mirror] url",
        setting=True,
    )


def unreachable(dsn: str, exc: psycopg.Error, grant: str) -> MirrorError:
    """One line for a connection that failed or was lost: libpq's reason, masked, and the fix
    it calls for (`grant`, when the role may not connect)."""
    why = reason(str(exc))
    low = why.lower()
    setting = True
    if "password" in low or "authentication" in low:
        hint = "check the user and password in [mirror] url (or PGPASSWORD, ~/.pgpass)"
    elif "permission denied" in low or "privilege" in low:
        return refused(dsn, "may not connect", exc, grant)
    elif "does not exist" in low:
        hint = "create it, or fix the name in [mirror] url"
    else:
        hint, setting = "check the host and port in [mirror] url and that the server runs", False
    message = f"PostgreSQL mirror {target(dsn)} cannot be used: {why}"
    return error(dsn, message, hint, setting=setting)


def conninfo(dsn: str, **params: str) -> str:
    """`dsn` (a URL or a libpq connection string) with `params` added: a MirrorError, without
    the password, when it does not parse."""
    try:
        return make_conninfo(dsn, **params)
    except psycopg.Error:
        raise MirrorRefused(
            "[mirror] url is neither a postgresql:// URL nor a libpq connection string",
            hint="write it as postgresql://user@host:5432/dbname",
        ) from None


def server_version(conn: psycopg.Connection[Any]) -> int:
    """The server's `server_version_num` (120005 for 12.5), known from the connection."""
    return conn.info.server_version


def check_server(conn: psycopg.Connection[Any], dsn: str, *, writer: bool) -> None:
    """Refuse a server older than `MIN_SERVER`, and for a `writer` one that takes no writes:
    a replica in recovery, or read-only by default."""
    version = server_version(conn)
    if version < MIN_SERVER:
        raise error(
            dsn,
            f"PostgreSQL mirror {target(dsn)} runs PostgreSQL {_version(version)}, "
            f"older than the {_version(MIN_SERVER)} the mirror needs",
            f"upgrade the server, or point [mirror] url at one of {_version(MIN_SERVER)} or later",
            setting=True,
        )
    if not writer:
        return
    row = conn.execute(_WRITABLE).fetchone()
    assert row is not None
    if row[0]:
        raise error(
            dsn,
            f"PostgreSQL mirror {target(dsn)} is a read-only replica (in recovery)",
            "point [mirror] url at the primary server",
        )
    if row[1] == "on":
        raise error(
            dsn,
            f"PostgreSQL mirror {target(dsn)} is read-only (default_transaction_read_only is on)",
            "point [mirror] url at a server that takes writes, or turn that setting off "
            "for the role or database",
        )


def connect(url: str, schema: str, *, readonly: bool) -> psycopg.Connection[tuple[Any, ...]]:
    """A checked connection, in autocommit, to the mirror in `schema` of the database `url`
    names (see the module docstring); a writer creates the schema when it is absent."""
    info = conninfo(
        url,
        application_name=application_name(),
        connect_timeout=str(CONNECT_TIMEOUT),
        keepalives="1",
        keepalives_idle=str(KEEPALIVE[0]),
        keepalives_interval=str(KEEPALIVE[1]),
        keepalives_count=str(KEEPALIVE[2]),
    )
    try:
        conn = psycopg.connect(info, autocommit=True)
    except psycopg.Error as exc:
        raise unreachable(url, exc, "GRANT it CONNECT on the database") from None
    try:
        check_server(conn, url, writer=not readonly)
        if readonly:
            _check_reader(conn, url, schema)
            conn.execute("SET default_transaction_read_only = on")
        else:
            _check_writer(conn, url, schema)
    except psycopg.Error as exc:
        conn.close()
        raise unreachable(url, exc, "GRANT it CONNECT on the database") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _schema_facts(conn: psycopg.Connection[Any], schema: str) -> tuple[Any, ...]:
    row = conn.execute(_SCHEMA, {"schema": schema, "marker": MARKER}).fetchone()
    assert row is not None
    return tuple(row)


def _check_writer(conn: psycopg.Connection[Any], url: str, schema: str) -> None:
    """Create `schema` when absent; else refuse one the role may not write, or one that
    belongs to another program."""
    user, exists, db_create, usage, create, tables, ours, _, foreign = _schema_facts(conn, schema)
    where = f"schema {schema} of PostgreSQL mirror {target(url)}"
    if not exists:
        if not db_create:
            raise _refused_schema(
                url,
                user,
                f"may not create {where} ([mirror] schema)",
                f"GRANT CREATE ON DATABASE to it, or create the schema for it "
                f"(CREATE SCHEMA {schema} AUTHORIZATION {user})",
            )
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        return
    if tables and not ours:
        raise _foreign(url, where)
    if not (usage and create):
        raise _refused_schema(
            url,
            user,
            f"may not create tables in {where}",
            f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {user}",
        )
    if foreign is not None:
        raise _refused_schema(
            url,
            user,
            f"does not own table {foreign} in {where} (the mirror adds columns and indexes)",
            f"ALTER TABLE {schema}.{foreign} OWNER TO {user} (each of the schema's tables)",
        )


def _check_reader(conn: psycopg.Connection[Any], url: str, schema: str) -> None:
    """Refuse a schema with no mirror, another program's, or one the role may not read."""
    user, exists, _, usage, _, tables, ours, unreadable, _ = _schema_facts(conn, schema)
    where = f"schema {schema} of PostgreSQL mirror {target(url)}"
    if tables and not ours:
        raise _foreign(url, where)
    if not (exists and ours):
        raise error(
            url,
            f"no mirror in {where}",
            "run ccsync backfill first, or check [mirror] schema",
        )
    if not usage:
        raise _refused_schema(
            url, user, f"may not use {where}", f"GRANT USAGE ON SCHEMA {schema} TO {user}"
        )
    if unreadable is not None:
        raise _refused_schema(
            url,
            user,
            f"may not read table {unreadable} in {where}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {user} (and ALTER DEFAULT "
            f"PRIVILEGES ... GRANT SELECT ON TABLES TO {user}, for the tables the mirror adds)",
        )


def _refused_schema(url: str, user: str, what: str, grant: str) -> MirrorError:
    return error(
        url,
        f"{role(url, user)} {what}",
        f"{grant}, or name a role that may in [mirror] url",
        setting=True,
    )


def _foreign(url: str, where: str) -> MirrorError:
    return error(
        url,
        f"{where} holds tables of another program (it has no {MARKER})",
        "choose another [mirror] schema (the mirror creates it), or empty that one",
        setting=True,
    )


def _version(num: int) -> str:
    """`server_version_num` as people write it: 120005 is 12.5, 90624 is 9.6."""
    major, minor = divmod(num, 10000)
    return str(major) if major >= 10 else f"{major}.{minor // 100}"
