"""sync.model.notices: `BatchReader` fed a body in chunks, its counts, kept problems and messages."""

from __future__ import annotations

import orjson
import pytest

from sync.model.notices import (
    KEPT_PROBLEMS,
    MAX_QUIET,
    BatchReader,
    NoticeError,
    WebhookNotice,
    parse_batch,
)


def _update(rid: object, rtype: str = "deals") -> dict[str, object]:
    return {"type": "updates", "attributes": {"resource_type": rtype, "resource_id": rid}}


def test_notices_come_out_as_their_item_completes_chunk_by_chunk() -> None:
    body = orjson.dumps(
        {
            "meta": {"data": [_update(99)], "x": [[1]]},  # another key's "data" is not the batch
            "data": [_update(1), {"type": "deletions", "id": 4, **_deletion_attrs()}],
        }
    )
    reader = BatchReader()
    seen: list[list[WebhookNotice]] = [reader.feed(body[i : i + 1]) for i in range(len(body))]
    last = reader.close()
    notices = [n for batch in seen for n in batch] + last
    assert notices == [
        WebhookNotice("update", "deals", "deals", 1),
        WebhookNotice("deletion", "stores", "Store", 7, "4"),
    ]
    # each came out with the byte that closed its item, not at the end
    assert sum(1 for batch in seen if batch) == 2 and last == []
    assert (reader.items, reader.valid, reader.invalid) == (2, 2, 0)


def _deletion_attrs() -> dict[str, object]:
    return {"attributes": {"resource_type": "Store", "resource_id": "007"}}


def test_invalid_items_are_counted_and_the_first_problems_kept() -> None:
    items = [_update(0) for _ in range(KEPT_PROBLEMS + 5)] + [_update(3), "x"]
    notices, problems = parse_batch(orjson.dumps({"data": items}))
    assert notices == [WebhookNotice("update", "deals", "deals", 3)]
    assert len(problems) == KEPT_PROBLEMS
    assert problems[0] == "data[0]: resource_id out of range"
    assert problems[1] == "data[1]: resource_id out of range"


def test_with_no_valid_item_close_names_the_first_problem() -> None:
    with pytest.raises(NoticeError, match=r"^data\[0\] must be an object$"):
        parse_batch(b'{"data": [7]}')
    with pytest.raises(NoticeError, match=r"^no valid notice: data\[0\] must be an object$"):
        parse_batch(b'{"data": [7, "x"]}')
    too_long = orjson.dumps({"data": [_update(1, "d" * 101)]})
    with pytest.raises(NoticeError, match=r"resource_type must be a non-empty string"):
        parse_batch(too_long)


def test_a_body_without_data_is_refused_at_close_not_before() -> None:
    reader = BatchReader()
    assert reader.feed(b'{"other": 1}') == []
    with pytest.raises(NoticeError, match=r"^`data` must be a list of notices$"):
        reader.close()


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        (b'  \n"' + b"a" * 10, "must be a JSON object"),  # refused before the string ends
        (b"12345", "must be a JSON object"),
        (b'{"data": [' + b"[" * 40, "deeper than 32 levels"),
        (b'{"meta": ' + b"[" * 40, "deeper than 32 levels"),
    ],
)
def test_a_body_that_is_no_batch_is_refused_at_the_chunk_that_shows_it(
    first: bytes, reason: str
) -> None:
    with pytest.raises(NoticeError, match=reason):
        BatchReader().feed(first)


def test_a_token_or_blank_run_longer_than_any_notice_holds_is_refused_as_it_passes() -> None:
    """Byte by byte or in chunks: refused once `MAX_QUIET` bytes came with no token ending,
    never at the body's end; a long token under it is read."""
    reader = BatchReader()
    reader.feed(b'{"data": [{"type": "updates", "attributes": {"resource_type": "')
    fed = 0
    with pytest.raises(NoticeError, match="over 65536 bytes"):
        for _ in range(64):  # 256 KiB: bounded, so a parser that never refuses fails here
            reader.feed(b"a" * 4096)
            fed += 4096
    assert MAX_QUIET <= fed < MAX_QUIET + 4096
    near = orjson.dumps({"meta": "b" * (MAX_QUIET - 100), "data": [_update(1)]})
    assert parse_batch(near)[0] == [WebhookNotice("update", "deals", "deals", 1)]


def test_a_number_past_what_python_reads_is_a_notice_error_not_the_parsers() -> None:
    """`resource_id` of 5,000 digits: the C parser's int conversion fails (a SystemError
    around a ValueError, a 500 before #50); it is a NoticeError naming it."""
    body = b'{"data": [{"type": "updates", "attributes": {"resource_type": "deals", '
    body += b'"resource_id": 1' + b"0" * 4999 + b"}}]}"
    with pytest.raises(NoticeError, match="over 4,300 digits"):
        parse_batch(body)
