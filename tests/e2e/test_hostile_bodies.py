"""Hostile notice bodies at the daemon's HTTP face with the shipped limits (#50): a huge id is a
400, a body that is no batch is refused at the chunk that shows it, with `Content-Length` or
chunked, and a body over the limit is refused from its header before a byte of it is read.

Each case runs the daemon's app (`sync.daemon.http`) on 127.0.0.1 and talks to it over a raw
socket, so the test decides exactly how much of the body is ever sent. Times are bounded only
generously ("within N seconds"); the measured ones are printed (`pytest -s`) for the notes.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from sync.core.config import WebhookSettings
from sync.daemon.http import make_app, serve
from sync.ingest.receiver import Receiver
from sync.store.queue import ChangeQueue
from tests.support.settings import SECRET

MB50 = 50 * 1000 * 1000
PIECE = 65536


async def _app(tmp_path: Path, **limits: int) -> tuple[aiohttp.web.AppRunner, int, ChangeQueue]:
    queue = ChangeQueue(sqlite3.connect(tmp_path / "q.db", isolation_level=None))
    settings = WebhookSettings(listen="127.0.0.1:0", secret=SECRET, **limits)  # type: ignore[arg-type]
    runner, port = await serve(make_app(Receiver(settings, queue)), "127.0.0.1", 0)
    return runner, port, queue


@pytest.fixture
async def shipped(tmp_path: Path) -> AsyncIterator[tuple[int, ChangeQueue]]:
    """The receiver with the shipped `[webhooks]` defaults, on a free port."""
    runner, port, queue = await _app(tmp_path)
    yield port, queue
    await runner.cleanup()


async def _head_and_part(
    port: int, first: bytes, *, chunked: bool, declared: int = MB50
) -> tuple[bytes, float, bool]:
    """Send the headers of a `declared`-byte body and only `first` of it; the answer's head,
    the seconds it took once `first` was sent, and whether the server then closed the
    connection (within 5 s, with the rest of the body never sent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared}"
    writer.write(
        f"POST /webhooks/{SECRET} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n".encode()
    )
    for at in range(0, len(first), PIECE):
        piece = first[at : at + PIECE]
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
    await writer.drain()
    sent = time.monotonic()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        took = time.monotonic() - sent
        length = int(
            next(h for h in head.split(b"\r\n") if h.startswith(b"Content-Length")).split(b":")[1]
        )
        await reader.readexactly(length)
        closed = await asyncio.wait_for(reader.read(1), 5) == b""
    finally:
        writer.close()
    return head, took, closed


NO_BATCH = {
    "not JSON": b"x" * (3 * PIECE),
    "a string": b'"' + b"a" * (3 * PIECE),
    "a number": b"1" * (3 * PIECE),
    "blanks": b" " * (3 * PIECE),
    "a long key": b'{"' + b"k" * (3 * PIECE),
    "a long id": b'{"data": [{"attributes": {"resource_id": "' + b"9" * (3 * PIECE),
    "nesting": b'{"data": [' + b"[" * (3 * PIECE),
}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("shape", list(NO_BATCH))
async def test_a_body_that_is_no_batch_is_refused_at_its_first_chunk(
    tmp_path: Path, shape: str, chunked: bool
) -> None:
    """A 50 MB body (the limit raised above it) of which only 192 KiB is ever sent: answered
    400 with `Connection: close` within seconds, and the connection closed, the other 49.8 MB
    never waited for (before #50, a token or run of blanks was read to its end)."""
    runner, port, queue = await _app(tmp_path, max_body_bytes=64 << 20)
    try:
        head, took, closed = await _head_and_part(port, NO_BATCH[shape], chunked=chunked)
    finally:
        await runner.cleanup()
    print(f"\n{shape}, {'chunked' if chunked else 'content-length'}: 400 in {took * 1000:.1f} ms")
    assert head.startswith(b"HTTP/1.1 400"), head
    assert b"Connection: close" in head and closed and took < 5.0
    assert queue.depth() == 0


async def test_a_body_over_the_limit_is_refused_from_its_header(
    shipped: tuple[int, ChangeQueue],
) -> None:
    """The shipped limit is 16 MiB, twice a 100,000-notice batch: a declared 50 MB is 413
    before a byte of the body is sent (a chunked body passing the limit: the unit tests)."""
    port, queue = shipped
    head, took, closed = await _head_and_part(port, b"", chunked=False)
    print(f"\n50 MB declared: 413 in {took * 1000:.1f} ms")
    assert head.startswith(b"HTTP/1.1 413") and b"Connection: close" in head and closed
    assert took < 5.0 and queue.depth() == 0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_sender_that_writes_all_50_mb_has_its_answer_within_seconds(
    tmp_path: Path, chunked: bool
) -> None:
    """A client that sends the whole 50 MB non-JSON body (aiohttp, reading the answer as it
    writes) has its 400 within 5 s of its first byte, chunked or not."""
    runner, port, _ = await _app(tmp_path, max_body_bytes=64 << 20)

    async def body() -> AsyncIterator[bytes]:
        for _ in range(MB50 // PIECE):
            yield b"x" * PIECE

    url = f"http://127.0.0.1:{port}/webhooks/{SECRET}"
    start = time.monotonic()
    try:
        async with aiohttp.ClientSession() as http:
            data = body() if chunked else b"x" * MB50
            async with http.post(url, data=data, headers={"Content-Type": "application/json"}) as r:
                status, took = r.status, time.monotonic() - start
    finally:
        await runner.cleanup()
    print(
        f"\n50 MB not JSON, {'chunked' if chunked else 'content-length'}: {status} in {took:.3f} s"
    )
    assert status == 400 and took < 5.0


async def test_a_5000_digit_id_is_a_400_naming_it(shipped: tuple[int, ChangeQueue]) -> None:
    """`resource_id: 1000…0` (5,000 digits) was a 500 (the parser's int conversion failed):
    now a 400 whose reason names it, and nothing queued."""
    port, queue = shipped
    rid = b"1" + b"0" * 4999
    raw = (
        b'{"data": [{"type": "updates", "attributes": {"resource_type": "articles", '
        b'"resource_id": ' + rid + b"}}]}"
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"http://127.0.0.1:{port}/webhooks/{SECRET}",
            data=raw,
            headers={"Content-Type": "application/json"},
        ) as r:
            assert r.status == 400
            assert "4,300 digits" in (await r.json())["error"]
    assert queue.depth() == 0
