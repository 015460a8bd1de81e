"""`sync.jobs.accountmap`: the recorded reader of each route turned into type -> e-mail."""

from __future__ import annotations

import orjson

from sync.channel import accounts
from sync.jobs.accountmap import account_of_types
from sync.store import Mirror


def _record(mirror: Mirror, text: str) -> None:
    mirror.conn.execute(
        "INSERT OR REPLACE INTO _sync_meta (key, value) VALUES (?, ?)", (accounts.META_KEY, text)
    )
    mirror.conn.commit()


def test_each_type_is_named_by_the_reader_of_its_listing_route(mirror: Mirror) -> None:
    readers = {"/deals": "a@example.com", "/malls/{id}/stores": "b@example.com"}
    _record(mirror, orjson.dumps({"readers": readers, "refused": {}}).decode())
    got = account_of_types(mirror, ["deals", "stores", "events", "no_such_type"])
    # events: no account has read it yet; an unknown name: no route at all.
    assert got == {"deals": "a@example.com", "stores": "b@example.com"}


def test_nothing_recorded_or_a_damaged_record_names_no_account(mirror: Mirror) -> None:
    assert account_of_types(mirror, ["deals"]) == {}
    _record(mirror, "{damaged")
    assert account_of_types(mirror, ["deals"]) == {}
