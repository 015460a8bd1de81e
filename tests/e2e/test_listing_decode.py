"""`decode_listing`: a listing page decoded into the members the mirror reads equals the page
parsed whole less its `links`, and anything off that shape is parsed (accepted, tolerated or
refused, with the same message) exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings

from sync.channel.client import ChannelClient
from sync.channel.pages import decode, decode_listing, to_page
from sync.core.errors import BadResponseError
from sync.emulator import Emulator
from sync.model import catalogue
from sync.model.scopes import Scope
from sync.pipeline.encoding import encode, version
from sync.pipeline.staging import stage_listing
from sync.store import Mirror
from tests.support.documents import documents
from tests.support.settings import make_settings


def _without_links(doc: Any) -> Any:
    """What `decode_listing` keeps of a well-formed listing: resources and relationships lose
    their `links` (and any member the mirror never reads); the document keeps its own."""
    keep = ("id", "type", "attributes", "relationships", "meta")

    def resource(r: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in r.items() if k in keep}
        if "relationships" in out:
            out["relationships"] = {
                name: {k: v for k, v in rel.items() if k == "data"}
                for name, rel in out["relationships"].items()
            }
        return out

    out = {k: v for k, v in doc.items() if k in ("data", "included", "meta", "links")}
    for member in ("data", "included"):
        if member in out:
            out[member] = [resource(r) for r in out[member]]
    return out


def _outcome(parse: Any, body: bytes) -> Any:
    try:
        return ("page", to_page(parse(body, "u", 200), 1, "u", 200, None))
    except BadResponseError as exc:
        return ("refused", exc.message, exc.hint)


async def test_real_pages_decode_to_the_page_less_its_links(
    emulator: Emulator, tmp_path: Path
) -> None:
    settings_ = make_settings(emulator, tmp_path / "unused.db")
    async with ChannelClient(settings_.upstream) as client:
        mall = int(sorted(emulator.ids("malls"), key=int)[0])
        for name, mall_id in (("deals", None), ("stores", mall), ("articles", None)):
            resp = await client.list_response(Scope(catalogue.TYPES[name], mall_id), 1)
            whole = orjson.loads(resp.body)
            assert any("links" in r for r in whole["data"])  # the case that matters
            assert decode_listing(resp.body, "u", 200) == _without_links(whole)
            # and the staged rows and links are those of the whole page
            fast = stage_listing(name, resp.body, number=1, url="u", status=200, mall_id=mall_id)
            page = to_page(whole, 1, "u", 200, None)
            assert fast.batches[0].rows and fast.last == page.last


@pytest.mark.parametrize(
    "body",
    [
        b'{"data": null}',
        b"[]",
        b'{"data": [1]}',
        b'{"data": [], "included": null}',
        b'{"data": [], "included": [1, {"id": "2", "type": "tags"}]}',
        b'{"data": [{"id": "1", "relationships": {"a": null}}]}',
        b'{"data": [{"id": "1", "relationships": {"a": []}}]}',
        b'{"data": [{"id": "1", "attributes": {"n": NaN}}]}',
        b'{"data": [{"id": "1", "attributes": {"n": 1e400}}]}',
        b'\xef\xbb\xbf{"data": []}',
        b'{"data": [{"id": "1", "attributes": {"s": "a\xff"}}]}',
        b'{"data": []} trailing',
        b'{"data": [{"id": "1", "attributes": {"s": "\\ud800"}}]}',
        b"",
    ],
)
def test_off_shape_pages_are_parsed_as_before(body: bytes) -> None:
    assert _outcome(decode_listing, body) == _outcome(decode, body)


def test_integers_beyond_sqlite_are_stored_as_reals_both_ways(tmp_path: Path) -> None:
    """The decoder keeps an integer beyond 64 bits exact: SQLite cannot bind one, so a column
    gets it as a real (as orjson gave it), and JSON text keeps every digit."""
    for n in (2**63, -(2**63) - 1, 2**64 + 5, 2**70):
        assert encode(n) == float(n)
    assert encode(2**63 - 1) == 2**63 - 1 and encode(-(2**63)) == -(2**63)
    assert (
        encode({"n": [2**70, -(2**70)]}) == '{"n":[1180591620717411303424,-1180591620717411303424]}'
    )
    body = orjson.dumps({"data": [{"id": "1", "type": "tags", "attributes": {"name": "x"}}]})
    body = body.replace(
        b'"x"', b'"x", "big": 1180591620717411303424, "deep": [1180591620717411303424]'
    )
    page = stage_listing("deals", body, number=1, url="u", status=200, mall_id=None)
    row = dict(zip(("id", *page.batches[0].columns), page.batches[0].rows[0], strict=True))
    assert row["big"] == float(2**70) and row["deep"] == "[1180591620717411303424]"
    assert version({"id": "1", "attributes": {"n": 2**70}})  # a tag's digest: no error
    scripts = b'"meta": {"scripts": [{"type": "js", "content": "x", "n": 1180591620717411303424}]}'
    page = stage_listing(
        "deals", body[:-1] + b", " + scripts + b"}", number=1, url="u", status=200, mall_id=None
    )
    mirror = Mirror.open(tmp_path / "m.db")
    try:
        mirror.write_staged(page.batches, scripts=page.scripts)  # written, not a TypeError
        assert mirror.conn.execute("select count(*) from meta_scripts").fetchone()[0] == 1
    finally:
        mirror.close()


def _linked(doc: Any) -> Any:
    """`doc` with `links` on its resources and their relationships, as the upstream sends them."""
    if not isinstance(doc, dict):
        return doc
    doc = dict(doc)
    for member in ("data", "included"):
        items = doc.get(member)
        if not isinstance(items, list):
            continue
        out = []
        for r in items:
            if isinstance(r, dict):
                r = {**r, "links": {"self": "http://x/1"}}
                rels = r.get("relationships")
                if isinstance(rels, dict):
                    r["relationships"] = {
                        k: {**v, "links": {"related": "http://x/1/r"}} if isinstance(v, dict) else v
                        for k, v in rels.items()
                    }
            out.append(r)
        doc[member] = out
    return doc


@settings(max_examples=300, deadline=None)
@given(documents.map(_linked))
@example(_linked({"data": [{"id": "0"}], "included": {}}))  # parsed again: whole
def test_any_document_is_accepted_or_refused_as_before(doc: Any) -> None:
    """Whatever the upstream sends, the fast decoder gives the same refusal, or a page that is
    the whole page less its links (the typed decode) or the whole page (a shape it refused,
    parsed again: an `included` that is not a list, a relationship that is not an object)."""
    body = orjson.dumps(doc)
    fast, slow = _outcome(decode_listing, body), _outcome(decode, body)
    if slow[0] == "refused":
        assert fast == slow
        return
    assert fast[0] == "page"
    page, whole = fast[1], slow[1]
    try:
        stripped = to_page(_without_links(orjson.loads(body)), 1, "u", 200, None)
    except (AttributeError, TypeError):  # not a shape the typed decode takes
        stripped = whole
    assert page in (stripped, whole)
