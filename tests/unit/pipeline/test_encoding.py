"""sync.pipeline.encoding: values as SQLite stores them, the version of a copy, ids as keys."""

from __future__ import annotations

import json

import pytest

from sync.core.errors import BadResponseError
from sync.pipeline.encoding import (
    INT64_MAX,
    INT64_MIN,
    dumps,
    encode,
    id_or_none,
    parse_id,
    version,
)


def test_encode_gives_sqlite_types_and_keeps_64_bit_integers_exact() -> None:
    assert encode(True) == 1 and type(encode(True)) is int
    assert encode(False) == 0
    assert encode({"a": [1, None]}) == '{"a":[1,null]}'
    assert encode([]) == "[]"
    assert encode(None) is None and encode("x") == "x" and encode(1.5) == 1.5
    assert encode(INT64_MAX) == INT64_MAX and type(encode(INT64_MAX)) is int
    assert encode(INT64_MIN) == INT64_MIN and type(encode(INT64_MIN)) is int
    assert encode(INT64_MAX + 1) == float(2**63)
    assert type(encode(INT64_MIN - 1)) is float


def test_dumps_writes_what_orjson_cannot_with_the_standard_library() -> None:
    big = {"n": 2**70, "s": "é"}
    text = dumps(big)
    assert text == b'{"n":1180591620717411303424,"s":"\xc3\xa9"}'
    assert json.loads(text) == big
    assert dumps({"a": 1}) == b'{"a":1}'


def test_version_is_the_stamp_else_a_digest_of_the_copy_as_sent() -> None:
    stamped = {"id": "1", "attributes": {"updated_at": "2026-01-01T00:00:00.000Z", "x": 1}}
    assert version(stamped) == "2026-01-01T00:00:00.000Z"
    tag = {"id": "7", "type": "tags", "attributes": {"name": "a"}}
    digest = version(tag)
    assert isinstance(digest, bytes) and len(digest) == 16  # XXH3-128
    assert version({"id": "7", "type": "tags", "attributes": {"name": "a"}}) == digest
    assert version({"id": "7", "type": "tags", "attributes": {"name": "b"}}) != digest
    # Keys are not sorted: another order only looks like a new version.
    assert version({"type": "tags", "id": "7", "attributes": {"name": "a"}}) != digest
    # A stamp that is not text (null, a number) is no version: the digest is used.
    assert isinstance(version({"attributes": {"updated_at": None}}), bytes)
    assert isinstance(version({"attributes": "odd"}), bytes)


def test_ids_are_integer_keys_or_refused_naming_the_id() -> None:
    assert id_or_none("42") == 42 and id_or_none(7) == 7
    assert id_or_none("x7") is None and id_or_none(None) is None and id_or_none([1]) is None
    assert parse_id(" 9") == 9
    with pytest.raises(BadResponseError) as caught:
        parse_id("abc" * 30)
    assert caught.value.message == (
        f"the upstream listed a resource whose id {('abc' * 30)[:40]!r} is not an integer"
    )
    assert caught.value.hint is not None and "nothing was deleted" in caught.value.hint
