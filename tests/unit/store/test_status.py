"""`sync.store.status`: per-type status (`Mirror.types`), the lines of `ccsync status`."""

from __future__ import annotations

from sync.store import Mirror, TypeStatus
from tests.support.pages import DEALS, res, write_page


def test_a_line_per_listable_type_with_a_table_or_bookkeeping(mirror: Mirror) -> None:
    write_page(mirror, DEALS, [res(1), res(2)])
    mirror.cursors.set("stores", "mall=1", "c1")
    mirror.cursors.set("stores", "mall=2", "c2")
    mirror.types.record("events", ok=False, error="boom", at="t1")
    lines = {s.type_name: s for s in mirror.types.lines()}
    assert lines["deals"] == TypeStatus("deals", 2, None, None, None)
    assert lines["stores"] == TypeStatus("stores", 0, None, "c2", None)
    assert lines["events"] == TypeStatus("events", 0, None, None, "boom")
    assert set(lines) == {"deals", "stores", "events"}


def test_success_clears_the_error(mirror: Mirror) -> None:
    mirror.types.record("deals", ok=False, error="boom", at="t1")
    mirror.types.record("deals", ok=True, at="t2")
    [line] = mirror.types.lines()
    assert line.as_dict() == {
        "type": "deals",
        "rows": 0,
        "last_sync_at": "t2",
        "cursor": None,
        "last_error": None,
    }


def test_an_error_is_stored_redacted(mirror: Mirror) -> None:
    mirror.types.record("deals", ok=False, error="GET /deals?token=s3cret failed", at="t1")
    [line] = mirror.types.lines()
    assert line.last_error is not None and "s3cret" not in line.last_error


def test_a_change_taken_moves_the_last_sync_forward_only(mirror: Mirror) -> None:
    mirror.types.took_change("deals", at="2026-01-01T00:00:05.000Z")  # no line yet: made
    mirror.types.record("deals", ok=False, error="boom", at="2026-01-01T00:00:06.000Z")
    mirror.types.took_change("deals", at="2026-01-01T00:00:04.000Z")  # older: no effect
    [line] = mirror.types.lines()
    assert (line.last_sync_at, line.last_error) == ("2026-01-01T00:00:05.000Z", "boom")
