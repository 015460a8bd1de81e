"""sync.readers.roles: the active daemon and the standbys of a PostgreSQL mirror, as the
server tells them (`pg_db`), and a server that cannot be asked, without the password."""

from __future__ import annotations

from sync.core.target import MirrorTarget
from sync.readers.roles import role_lines, roles
from sync.store.pg.lock import ActiveLock
from tests.support.ports import free_port

SCHEMA = "mirror_r"


def test_no_daemon_then_an_active_one_and_a_standby(pg_db: str) -> None:
    target = MirrorTarget(url=pg_db, schema=SCHEMA)
    assert role_lines(roles(target))[0].startswith("active daemon: none")
    with (
        ActiveLock(pg_db, SCHEMA, name="ccsync@h1:11") as active,
        ActiveLock(pg_db, SCHEMA, name="ccsync@h2:22") as standby,
    ):
        assert active.try_acquire() and not standby.try_acquire()
        standby.stand_by()
        found = roles(target)
        assert "ccsync@h1:11" in found["active"]
        assert len(found["standbys"]) == 1 and "ccsync@h2:22" in found["standbys"][0]
        lines = role_lines(found)
        assert "ccsync@h1:11" in lines[0] and "waiting to take over" in lines[1]
    assert roles(target) == {"active": None, "standbys": []}  # both sessions ended


def test_a_server_that_cannot_be_asked_is_one_line_without_the_password() -> None:
    url = f"postgresql://w:Pa55-never@127.0.0.1:{free_port()}/db"
    lines = role_lines(roles(MirrorTarget(url=url, schema=SCHEMA)))
    assert len(lines) == 1 and "cannot be asked" in lines[0] and "Pa55-never" not in lines[0]
