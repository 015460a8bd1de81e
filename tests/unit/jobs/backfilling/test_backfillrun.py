"""`sync.jobs.backfilling.backfillrun`: a backfill's start taken once and kept across resumes, forgotten
when it finishes, and the cursors' start on the stamps' scale as known at the end."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sync.channel.clock import UpstreamClock
from sync.core.config import Settings, parse_config
from sync.jobs.backfilling.backfillrun import (
    PREFILLED,
    STARTED_AT,
    STARTED_LOCAL,
    BackfillReport,
    TypeReport,
    begin,
    cursor_start,
    finish,
)
from sync.store import Mirror
from tests.support.jobfakes import NOW, stamp, table


class StartClient:
    """What `begin` and `cursor_start` read of a client: its token, login and clock."""

    def __init__(self, local: float = NOW) -> None:
        self.credentials = SimpleNamespace(has_token=False)
        self.logins = 0
        self.clock = UpstreamClock(local=lambda: local)

    async def log_in(self, *, every: bool = False) -> int:
        if self.credentials.has_token and not every:
            return 0
        self.logins += 1
        self.credentials.has_token = True
        return 1


def _settings() -> Settings:
    return parse_config(
        {
            "upstream": {
                "base_url": "http://u.test",
                "email": "a@b.c",
                "password": "x",
                "types": ["malls", "articles", "events"],
            }
        }
    )


def _meta(mirror: Mirror) -> dict[str, str]:
    return dict(mirror.conn.execute("SELECT key, value FROM _sync_meta").fetchall())


def test_a_report_adds_up_its_types_rows() -> None:
    report = BackfillReport({"deals": TypeReport(rows=5), "events": TypeReport(rows=7, pages=2)})
    assert report.rows == 12
    assert BackfillReport().rows == 0


async def test_a_start_is_taken_once_and_kept_across_resumes(mirror: Mirror) -> None:
    table(mirror, "articles", [(1, stamp(1))])  # held before: the missed-row pass must run
    table(mirror, "events", [])
    client = StartClient()
    client.clock.observe(stamp(0), NOW)  # the stamps' clock: the local one
    started = await begin(client, mirror, _settings(), restart=False, clock=lambda: 123.25)
    assert started == stamp(0) and client.logins == 1
    meta = _meta(mirror)
    assert (meta[STARTED_AT], meta[STARTED_LOCAL], meta[PREFILLED]) == (
        stamp(0),
        "123.250",
        "articles",
    )
    # A resume keeps it, without a login.
    later = StartClient(NOW + 600)
    assert await begin(later, mirror, _settings(), restart=False, clock=lambda: 999.0) == stamp(0)
    assert later.logins == 0 and _meta(mirror)[STARTED_LOCAL] == "123.250"
    # A restart takes a new one.
    later.clock.observe(stamp(600), NOW + 600)
    assert await begin(later, mirror, _settings(), restart=True, clock=lambda: 999.0) == stamp(600)
    finish(mirror)
    assert _meta(mirror).get(STARTED_AT) is None
    assert _meta(mirror).get(STARTED_LOCAL) is None


async def test_a_refused_login_leaves_the_mirror_as_it_was(mirror: Mirror) -> None:
    class Refused(StartClient):
        async def log_in(self, *, every: bool = False) -> int:
            raise RuntimeError("login refused")

    mirror.conn.execute("INSERT INTO _sync_meta VALUES (?, ?)", (STARTED_AT, stamp(5)))
    mirror.conn.commit()
    with pytest.raises(RuntimeError, match="login refused"):
        await begin(Refused(), mirror, _settings(), restart=True, clock=lambda: 1.0)
    assert _meta(mirror).get(STARTED_AT) == stamp(5)


def test_the_cursors_start_at_the_local_start_on_the_clock_known_now(mirror: Mirror) -> None:
    client = StartClient(NOW)
    # No local start kept (an older version's run), or no stamp seen yet: the start as taken.
    assert cursor_start(client, mirror, stamp(0)) == stamp(0)
    mirror.conn.execute("INSERT INTO _sync_meta VALUES (?, ?)", (STARTED_LOCAL, f"{NOW - 60:.3f}"))
    mirror.conn.commit()
    assert cursor_start(client, mirror, stamp(0)) == stamp(0)
    # The stamps run 30 s behind the local clock: the local start a minute ago, on their scale.
    client.clock.observe(stamp(0), NOW + 30)
    assert cursor_start(client, mirror, "ignored") == "2025-12-31T23:58:30.000Z"
    mirror.conn.execute("UPDATE _sync_meta SET value = 'junk' WHERE key = ?", (STARTED_LOCAL,))
    mirror.conn.commit()
    assert cursor_start(client, mirror, stamp(0)) == stamp(0)
