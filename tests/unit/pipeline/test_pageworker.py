"""sync.pipeline.pageworker: a bad page as a `Refused` value, and `serve` answering on a pipe."""

from __future__ import annotations

import io
import json
import pickle

from sync.pipeline.batches import StagedPage
from sync.pipeline.pageworker import ANSWER, REQUEST, Refused, from_wire, serve, stage_request

V = "2026-01-01T00:00:00.000Z"


def _body(deal: int) -> bytes:
    return json.dumps(
        {
            "data": [{"id": str(deal), "type": "deals", "attributes": {"updated_at": V}}],
            "included": [{"id": "10", "type": "images", "attributes": {"updated_at": V}}],
        }
    ).encode()


def _request(ticket: int, written: list[int], body: bytes) -> bytes:
    meta = pickle.dumps(("deals", 1, 200, None, (), ticket, written))
    return REQUEST.pack(len(meta), len(body)) + meta + body


def _answers(raw: bytes) -> list[StagedPage | Refused]:
    out, stream = [], io.BytesIO(raw)
    while head := stream.read(ANSWER.size):
        (size,) = ANSWER.unpack(head)
        out.append(from_wire(stream.read(size)))
    return out


def test_a_bad_page_comes_back_as_a_refusal_never_raised() -> None:
    got = stage_request(("deals", b"<html>", 1, 200, None, ()))
    assert isinstance(got, Refused) and "not JSON" in got.message
    page = stage_request(("deals", _body(1), 3, 200, None, ()))
    assert isinstance(page, StagedPage) and page.number == 3 and page.batches[0].ids == [1]


def test_serve_answers_in_order_and_leaves_out_rows_confirmed_written() -> None:
    inp = io.BytesIO(
        _request(1, [], _body(1))
        + _request(2, [], _body(2))  # page 1 not yet written: its image is sent again
        + _request(3, [1], _body(3))  # page 1 written: its image is not even staged
        + _request(4, [], b"{")
        + _request(5, [], _body(5))[:-3]  # cut short: the main process went away
    )
    out = io.BytesIO()
    serve(inp, out)
    answers = _answers(out.getvalue())
    assert len(answers) == 4
    pages = [a for a in answers[:3] if isinstance(a, StagedPage)]
    assert [p.ticket for p in pages] == [1, 2, 3]
    assert [[b.ids for b in p.batches] for p in pages] == [[[1], [10]], [[2], [10]], [[3]]]
    assert isinstance(answers[3], Refused)
