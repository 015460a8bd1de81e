"""Values are checked against the declared types (#31): `display_order: "seven"` or
`is_active: "yes"` is refused, with one structured log line, a metric and a count per type in
`ccsync status`, and the row keeps its last good copy; a lossless conversion (`"7"`, `"true"`)
is applied and counted; attributes the spec does not list keep the widening rule; a backfill of
the emulator, whose values all fit, is unaffected."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from structlog.testing import capture_logs

from sync.channel.client import ChannelClient
from sync.commands.mirror import status_command
from sync.core.metrics import Metrics
from sync.emulator import Emulator
from sync.jobs.backfilling.backfill import Backfill
from sync.model import catalogue
from sync.pipeline.checks import VALUE_CHARS, coerce
from sync.pipeline.pageworker import from_wire, to_wire
from sync.pipeline.staging import stage_listing
from sync.readers.status import status_data
from sync.store import Mirror
from tests.support.backfilled import backfill
from tests.support.compare import compare
from tests.support.pages import write_page
from tests.support.settings import settings_for

ARTICLES = catalogue.TYPES["articles"]
MALLS = catalogue.TYPES["malls"]
OLD, NEW = "2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"


def _article(rid: int, stamp: str = OLD, **attributes: Any) -> dict[str, Any]:
    attrs = {"title": f"article {rid}", "display_order": 3, "is_active": True, **attributes}
    attrs["updated_at"] = stamp
    return {"id": str(rid), "type": "articles", "attributes": attrs}


def _row(m: Mirror, table: str, rid: int) -> dict[str, Any] | None:
    return m.table(table).get(rid)


def _typeof(m: Mirror, table: str, column: str, rid: int) -> str:
    return str(
        m.conn.execute(f"SELECT typeof([{column}]) FROM [{table}] WHERE id = ?", (rid,)).fetchone()[
            0
        ]
    )


def test_a_misfit_value_is_refused_logged_counted_and_shown(tmp_path: Path) -> None:
    """Text in an integer and a boolean column, an object where a number is expected: those
    rows keep their last good copy (or stay out), each value is logged once with type, id,
    attribute and the value clipped, counted in the metric and shown by `ccsync status`; a
    later copy that fits is written and clears the refusal."""
    db = tmp_path / "m.db"
    m = Mirror.open(db)
    metrics = Metrics()
    m.values.on_values = lambda t, outcome, n: metrics.values.labels(type=t, outcome=outcome).inc(n)
    try:
        write_page(m, ARTICLES, [_article(1), _article(2)])
        long_text = "yes " * 50
        with capture_logs() as logs:
            write_page(
                m,
                ARTICLES,
                [
                    _article(1, NEW, title="changed", display_order="seven"),
                    _article(2, NEW, title="changed", is_active=long_text),
                    _article(3, NEW, display_order={"n": 7}),
                    _article(4, NEW, title="fits"),
                ],
            )
            write_page(
                m, MALLS, [{"id": "9", "type": "malls", "attributes": {"latitude": {"lat": 1}}}]
            )
        assert _row(m, "articles", 1) == {**(_row(m, "articles", 1) or {}), "title": "article 1"}
        assert (_row(m, "articles", 1) or {})["display_order"] == 3
        assert (_row(m, "articles", 1) or {})["updated_at"] == OLD
        assert (_row(m, "articles", 2) or {})["is_active"] == 1
        assert _row(m, "articles", 3) is None and _row(m, "malls", 9) is None
        assert (_row(m, "articles", 4) or {})["title"] == "fits"
        refused = sorted(
            (e for e in logs if e["event"] == "mirror.value_refused"),
            key=lambda e: (e["type"], e["id"]),
        )
        assert [(e["type"], e["id"], e["attribute"]) for e in refused] == [
            ("articles", 1, "display_order"),
            ("articles", 2, "is_active"),
            ("articles", 3, "display_order"),
            ("malls", 9, "latitude"),
        ]
        assert refused[0]["value"] == '"seven"'
        assert refused[0]["problem"] == "text where the spec declares an integer"
        assert len(refused[1]["value"]) == VALUE_CHARS and refused[1]["value"].endswith("...")
        assert refused[2]["problem"] == "an object where the spec declares an integer"
        assert refused[3]["problem"] == "an object where the spec declares a number"
        assert all(e["log_level"] == "error" for e in refused)
        sample = metrics.registry.get_sample_value
        assert sample("sync_values_total", {"type": "articles", "outcome": "refused"}) == 3
        assert sample("sync_values_total", {"type": "malls", "outcome": "refused"}) == 1
        faults = m.values.faults()
        assert faults["articles"]["refused"] == 3 and faults["malls"]["refused"] == 1
    finally:
        m.close()

    cfg = tmp_path / "sync.toml"
    cfg.write_text(
        '[upstream]\nbase_url = "http://127.0.0.1:9"\nemail = "a@b.c"\npassword = "pw-123456"\n'
        f'[mirror]\npath = "{db}"\n[webhooks]\nenabled = false\n'
    )
    shown = CliRunner().invoke(status_command, ["--config", str(cfg)])
    assert shown.exit_code == 0, shown.output
    assert "values of articles: 3 refused, 0 coerced (rows kept at their last good copy" in (
        shown.output
    )
    as_json = json.loads(
        CliRunner().invoke(status_command, ["--config", str(cfg), "--json"]).output
    )
    assert as_json["values"]["malls"]["last_refused"]["attribute"] == "latitude"

    m = Mirror.open(db)
    try:
        write_page(m, ARTICLES, [_article(1, "2026-03-01T00:00:00.000Z", display_order=8)])
        assert (_row(m, "articles", 1) or {})["display_order"] == 8
        assert m.values.faults()["articles"]["refused"] == 2  # row 1 is whole again
    finally:
        m.close()


def test_a_lossless_coercion_is_applied_and_counted(tmp_path: Path) -> None:
    """`"7"` for an integer, `"true"`/`"false"` and 0/1 for a boolean, `"40.5"` for a number:
    written as the declared type, counted per type, logged once at info."""
    m = Mirror.open(tmp_path / "m.db")
    metrics = Metrics()
    m.values.on_values = lambda t, outcome, n: metrics.values.labels(type=t, outcome=outcome).inc(n)
    try:
        with capture_logs() as logs:
            write_page(
                m,
                ARTICLES,
                [
                    _article(1, display_order="7", is_active="true"),
                    _article(2, display_order=7.0, is_active="false"),
                    _article(3, is_active=1),
                ],
            )
            write_page(m, ARTICLES, [_article(4, display_order="9")])  # the same attribute: debug
            write_page(m, MALLS, [{"id": "5", "type": "malls", "attributes": {"latitude": "40.5"}}])
        rows = {r: _row(m, "articles", r) or {} for r in (1, 2, 3, 4)}
        assert [rows[r]["display_order"] for r in (1, 2, 4)] == [7, 7, 9]
        assert [rows[r]["is_active"] for r in (1, 2, 3)] == [1, 0, 1]
        assert _typeof(m, "articles", "display_order", 1) == "integer"
        assert _typeof(m, "articles", "is_active", 1) == "integer"
        assert (_row(m, "malls", 5) or {})["latitude"] == 40.5
        assert _typeof(m, "malls", "latitude", 5) == "real"
        faults = m.values.faults()
        assert faults["articles"] == {"refused": 0, "coerced": 6}
        assert faults["malls"] == {"refused": 0, "coerced": 1}
        sample = metrics.registry.get_sample_value
        assert sample("sync_values_total", {"type": "articles", "outcome": "coerced"}) == 6
        coerced = [e for e in logs if e["event"] == "mirror.values_coerced"]
        assert [(e["attribute"], e["log_level"], e["count"]) for e in coerced] == [
            ("display_order", "info", 2),
            ("is_active", "info", 3),
            ("display_order", "debug", 1),
            ("latitude", "info", 1),
        ]
        assert not [e for e in logs if e["event"] == "mirror.value_refused"]
    finally:
        m.close()


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("integer", "7", 7),
        ("integer", "-12", -12),
        ("integer", 7.0, 7),
        ("integer", "07", None),
        ("integer", "7.0", None),
        ("integer", 7.5, None),
        ("integer", True, None),
        ("integer", "seven", None),
        ("integer", 2**70, None),
        ("integer", str(2**70), None),
        ("boolean", "true", 1),
        ("boolean", "false", 0),
        ("boolean", 1, 1),
        ("boolean", 0, 0),
        ("boolean", 2, None),
        ("boolean", "yes", None),
        ("boolean", "True", None),
        ("number", "40.5", 40.5),
        ("number", "3", 3),
        ("number", "40.50", None),
        ("number", "1e3", None),
        ("number", "nan", None),
        ("number", "inf", None),
        ("number", True, None),
        ("number", [1], None),
    ],
)
def test_only_lossless_unambiguous_conversions(kind: Any, raw: Any, expected: Any) -> None:
    """A conversion is made only when the value reads back as it was sent."""
    got = coerce(kind, raw)
    assert got == expected and type(got) is type(expected)


def test_misfits_cross_the_page_worker_and_undeclared_attributes_still_widen(
    tmp_path: Path,
) -> None:
    """A page staged in the worker carries its refusals and coercions back; a value of an
    attribute the spec does not list is never refused (its column widens as before)."""
    body = json.dumps(
        {
            "data": [
                _article(1, display_order="seven", brand_new=5),
                _article(2, display_order="7", brand_new="five"),
            ],
            "links": {"last": "https://x/articles?page[number]=1"},
        }
    ).encode()
    page = from_wire(
        to_wire(stage_listing("articles", body, number=1, url="u", status=200, mall_id=None))
    )
    (batch,) = page.batches
    assert batch.ids == [2]
    assert [r[:3] for r in batch.refused] == [(1, "display_order", '"seven"')]
    assert batch.coerced == [(2, "display_order", '"7"')]
    m = Mirror.open(tmp_path / "m.db")
    try:
        write_page(m, ARTICLES, [_article(3, brand_new=5)])
        m.write_staged(page.batches)
        assert (_row(m, "articles", 2) or {})["brand_new"] == "five"  # widened to TEXT
        assert (_row(m, "articles", 2) or {})["display_order"] == 7
    finally:
        m.close()


async def test_a_backfill_of_the_emulator_is_unaffected(emulator: Emulator, tmp_path: Path) -> None:
    """The emulator's values all fit: nothing is refused or coerced and the mirror equals the
    upstream; one value made wrong upstream is then refused on the next pass, and its row
    keeps its last good copy."""
    db = tmp_path / "m.db"
    with capture_logs() as logs:
        settings = await backfill(emulator, db)
    result = compare(db, emulator)
    assert result.differences == 0 and result.rows_compared > 0, result.summary()
    assert not [e for e in logs if e["event"] in ("mirror.value_refused", "mirror.values_coerced")]
    assert status_data(settings.mirror.path)["values"] == {}

    article = emulator.ids("articles")[0]
    before = (
        sqlite3.connect(db)
        .execute("SELECT title, display_order FROM articles WHERE id = ?", (int(article),))
        .fetchone()
    )
    emulator.update("articles", article, {"title": "refused copy", "display_order": "seven"})
    mirror = Mirror.open(db)
    try:
        with capture_logs() as logs:
            async with ChannelClient(settings.upstream) as client:
                await Backfill(client, mirror, settings_for(emulator, db)).run(restart=True)
        row = mirror.conn.execute(
            "SELECT title, display_order FROM articles WHERE id = ?", (int(article),)
        ).fetchone()
        assert tuple(row) == tuple(before)
        # Refused in its page, and again when the pass after the pages refetches the stale row.
        assert {e["id"] for e in logs if e["event"] == "mirror.value_refused"} == {int(article)}
    finally:
        mirror.close()
