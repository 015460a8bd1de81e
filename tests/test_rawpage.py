"""The backfill's SQL-side page write (`Mirror.write_raw_page`) against the parsed one.

Both paths must leave the same database: same tables, columns and rows, link tables in order,
included rows, scripts; and the raw path must refuse what `to_page` refuses.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from sync import catalogue
from sync.channel.pages import to_page
from sync.emulator import Emulator
from sync.errors import BadResponseError
from sync.store import Mirror

TYPES = ["malls", "deals", "articles", "events", "stores", "products", "job_listings", "contacts"]


def _dump(path: Path) -> dict[str, Any]:
    """Every table except bookkeeping and scripts' clock columns: columns and sorted rows."""
    conn = sqlite3.connect(path)
    out: dict[str, Any] = {}
    try:
        for (name,) in conn.execute("select name from sqlite_master where type='table'"):
            if name.startswith("_sync_"):
                continue
            cur = conn.execute(f"select * from [{name}]")
            cols = [d[0] for d in cur.description]
            keep = [i for i, c in enumerate(cols) if c not in ("first_seen_at", "last_seen_at")]
            rows = sorted((tuple(r[i] for i in keep) for r in cur), key=repr)
            out[name] = (
                sorted(cols),
                [dict(zip([cols[i] for i in keep], r, strict=True)) for r in rows],
            )
    finally:
        conn.close()
    return out


def _pages(emu: Emulator) -> list[tuple[str, int | None, bytes]]:
    """Real pages as the emulator serves them (every included relationship), in-process."""
    from aiohttp.test_utils import make_mocked_request

    del make_mocked_request
    out = []
    for name in TYPES:
        rtype = catalogue.TYPES[name]
        mall = int(emu.ids("malls")[0]) if rtype.scope == "mall" else None
        ids = emu.ids(name, mall_id=mall)
        for start in range(0, min(len(ids), 60), 20):
            data = [
                emu.resource(name, i, include=[r.name for r in rtype.relationships])
                for i in ids[start : start + 20]
            ]
            included: dict[tuple[str, str], dict[str, Any]] = {}
            for res in data:
                for rel in rtype.relationships:
                    linked = (res.get("relationships", {}).get(rel.name) or {}).get("data")
                    for ref in linked if isinstance(linked, list) else [linked] if linked else []:
                        if ref["type"] in catalogue.TYPES and ref["type"] != name:
                            key = (ref["type"], ref["id"])
                            if (
                                key not in included
                                and int(ref["id"]) in emu.data.by_type[ref["type"]]
                            ):
                                included[key] = emu.resource(ref["type"], ref["id"])
            doc = {
                "data": data,
                "included": list(included.values()),
                "links": {"last": f"http://x/{name}?page%5Bnumber%5D=7&page%5Bsize%5D=20"},
                "meta": {"scripts": [{"type": "text/javascript", "content": "track()"}]},
            }
            out.append((name, mall, orjson.dumps(doc)))
    return out


def _write_both(tmp_path: Path, pages: list[tuple[str, int | None, bytes]]) -> tuple[Path, Path]:
    parsed, raw = tmp_path / "parsed.db", tmp_path / "raw.db"
    a, b = Mirror.open(parsed), Mirror.open(raw)
    try:
        for n, (name, mall, body) in enumerate(pages, 1):
            rtype = catalogue.TYPES[name]
            page = to_page(orjson.loads(body), n, "u", 200, None)
            a.write_page(
                rtype, page.resources, page.included, mall_id=mall, scripts=page.meta.get("scripts")
            )
            result = b.write_raw_page(
                rtype, body.decode(), url="u", status=200, mall_id=mall, number=n, scope_key=""
            )
            assert result.info.last == 7 and result.info.served == len(page.resources)
            assert result.rows == len(page.resources)
    finally:
        a.close()
        b.close()
    return parsed, raw


def test_raw_and_parsed_writes_leave_the_same_mirror(tmp_path: Path) -> None:
    emu = Emulator(resources=600, seed=11)
    pages = _pages(emu)
    assert len(pages) > 10
    parsed, raw = _write_both(tmp_path, pages)
    a, b = _dump(parsed), _dump(raw)
    assert sorted(a) == sorted(b)
    for table in a:
        assert a[table][0] == b[table][0], table
        assert a[table][1] == b[table][1], table
    assert any(t.endswith("_images") for t in a) and "images" in a and "meta_scripts" in a


def _odd_page(**changes: Any) -> bytes:
    res = {
        "id": "5",
        "type": "deals",
        "attributes": {
            "title": "a",
            "updated_at": "2026-01-01T00:00:00.000Z",
            "is_featured": True,
            "tags_list": ["x"],
            "mall_id": 3,
            "Title": "dup",
        },
        "meta": {"deprecated_fields": ["x"]},
        "relationships": {
            "images": {
                "data": [
                    {"type": "images", "id": "9"},
                    {"type": "images", "id": "bad"},
                    {"type": "images", "id": 4},
                ]
            },
            "stores": {"data": None},
        },
    }
    res.update(changes)
    return orjson.dumps(
        {
            "data": [res, {"id": 6, "type": "deals", "attributes": {"title": "b", "new'col": 1.5}}],
            "links": {"last": {"href": "http://x/deals?page[number]=2"}},
        }
    )


def test_edge_shapes_match_the_parsed_path(tmp_path: Path) -> None:
    pages = [("deals", None, _odd_page()), ("stores", 4, _odd_page(type="stores"))]
    parsed, raw = _write_both_any(tmp_path, pages)
    assert _dump(parsed) == _dump(raw)


def _write_both_any(
    tmp_path: Path, pages: list[tuple[str, int | None, bytes]]
) -> tuple[Path, Path]:
    parsed, raw = tmp_path / "parsed.db", tmp_path / "raw.db"
    a, b = Mirror.open(parsed), Mirror.open(raw)
    try:
        for n, (name, mall, body) in enumerate(pages, 1):
            rtype = catalogue.TYPES[name]
            page = to_page(orjson.loads(body), n, "u", 200, None)
            a.write_page(rtype, page.resources, page.included, mall_id=mall)
            info = b.write_raw_page(
                rtype, body.decode(), url="u", status=200, mall_id=mall, number=n, scope_key=""
            ).info
            assert info.last == page.last
    finally:
        a.close()
        b.close()
    return parsed, raw


@pytest.mark.parametrize(
    "body",
    [
        b'{"data": [',
        b"[]",
        b'{"data": {}}',
        b'{"data": [1]}',
        b'{"data": [{"type": "deals"}]}',
        b'{"data": [{"id": true}]}',
        b'{"data": [{"id": "1", "attributes": []}]}',
        b'{"data": [{"id": "1", "relationships": {"images": 3}}]}',
        b'{"data": [], "included": [{"id": "1", "type": "images", "meta": 2}]}',
    ],
)
def test_bad_pages_are_refused_like_the_parsed_path(tmp_path: Path, body: bytes) -> None:
    with pytest.raises(BadResponseError):
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BadResponseError("not JSON") from None
        to_page(doc, 1, "u", 200, None)
    m = Mirror.open(tmp_path / "m.db")
    try:
        with pytest.raises(BadResponseError):
            m.write_raw_page(
                catalogue.TYPES["deals"], body.decode(), url="u", status=200, number=1, scope_key=""
            )
        assert not m.has_table("deals")
    finally:
        m.close()


def test_tombstoned_rows_stay_deleted_and_older_copies_lose(tmp_path: Path) -> None:
    m = Mirror.open(tmp_path / "m.db")
    try:

        def page(*rows: tuple[str, str, str]) -> str:
            return orjson.dumps(
                {
                    "data": [
                        {"id": i, "type": "deals", "attributes": {"title": t, "updated_at": u}}
                        for i, t, u in rows
                    ]
                }
            ).decode()

        deals = catalogue.TYPES["deals"]
        m.write_raw_page(
            deals,
            page(("1", "new", "2026-02-01T00:00:00.000Z"), ("2", "x", "2026-01-01T00:00:00.000Z")),
            url="u",
            status=200,
            number=1,
            scope_key="",
        )
        m.delete("deals", [2])
        r = m.write_raw_page(
            deals,
            page(
                ("1", "old", "2026-01-01T00:00:00.000Z"), ("2", "back", "2026-03-01T00:00:00.000Z")
            ),
            url="u",
            status=200,
            number=1,
            scope_key="",
        )
        assert r.skipped_deleted == 1
        assert m.get("deals", 2) is None
        assert m.get("deals", 1)["title"] == "new"  # type: ignore[index]
    finally:
        m.close()
