"""`sync.store.pg.arrays`: a page's column as one binary array parameter, against a real
PostgreSQL; the Python encoder (`format_fields`) makes the bytes psycopg's C routine does, so a
psycopg release that moves that private routine costs speed, never a write."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from sync.store.pg.arrays import (
    ARRAY_HEAD,
    FIELD_COUNT,
    Array,
    ArrayDumper,
    array_type,
    format_fields,
    format_row_binary,
)

INT8, TEXT, INT8_ARRAY, TEXT_ARRAY = 20, 25, 1016, 1009


def _encoded(conn: psycopg.Connection[Any], values: list[Any], oid: int, encode: Any) -> bytearray:
    tx = Transformer.from_context(conn)
    tx.set_dumper_types([oid] * len(values), pq.Format.BINARY)
    out = bytearray(ARRAY_HEAD.pack(1, 1 if None in values else 0, oid, len(values), 1))
    encode(values, tx, out)
    del out[ARRAY_HEAD.size : ARRAY_HEAD.size + FIELD_COUNT]
    return out


def test_the_python_encoder_makes_the_bytes_of_psycopg_s_own(pg_db: str) -> None:
    with psycopg.connect(pg_db) as conn:
        for values, oid in (([1, None, -(2**62)], INT8), (["a", None, "é\u2603", ""], TEXT)):
            assert _encoded(conn, values, oid, format_fields) == _encoded(
                conn, values, oid, format_row_binary
            )


def test_an_array_bound_as_one_parameter_reads_back_as_its_values(pg_db: str) -> None:
    with psycopg.connect(pg_db) as conn:
        conn.adapters.register_dumper(Array, ArrayDumper)
        for values, oid, array in (
            ([3, None, 1], INT8, INT8_ARRAY),
            (["x", None, "a\u00e9"], TEXT, TEXT_ARRAY),
        ):
            bound = array_type(array)(_encoded(conn, values, oid, format_fields))
            got = conn.execute("SELECT unnest(%b)", (bound,)).fetchall()
            assert [r[0] for r in got] == values
