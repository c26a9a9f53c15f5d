"""A small round-robin HTTP/1.1 proxy for the scale-out tests: each request to the next backend.

``python rr_proxy.py LISTEN_PORT BACKEND_PORT [BACKEND_PORT ...]`` (127.0.0.1 only). Every
request is sent to the next backend in turn on a fresh connection (``Connection: close``), its
answer streamed back as it comes (SSE included) with ``Connection: close``, so no two
consecutive requests reach the same process. It prints one line per request,
``<backend index> <HTTP method> <JSON-RPC method or ->``, to stdout as it sends it on (the tests count them),
and ``cut <HTTP method> <JSON-RPC method>`` when a client went away before its whole answer reached it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys

MAX_HEAD = 64 * 1024


def _rewrite(head: bytes) -> bytes:
    """The head with ``Connection: close`` instead of any connection header (and keep-alive)."""
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if line and not line.lower().startswith((b"connection:", b"keep-alive:"))]
    return b"\r\n".join([lines[0], *kept, b"connection: close", b"", b""])


def _what(body: bytes) -> str:
    """The JSON-RPC method a POST carries (``response`` for a client's reply, ``batch``), ``-`` without a body."""
    if not body:
        return "-"
    try:
        message = json.loads(body)
    except ValueError:
        return "invalid"
    if isinstance(message, list):
        return "batch"
    if not isinstance(message, dict):
        return "invalid"
    return str(message.get("method") or "response")


class _Relayed:
    """What ``_pipe`` copied: how many bytes, and the last few (a chunked body ends ``0\\r\\n\\r\\n``)."""

    def __init__(self) -> None:
        self.size = 0
        self.tail = b""


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, relayed: _Relayed | None = None) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
            if relayed is not None:
                relayed.size += len(chunk)
                relayed.tail = (relayed.tail + chunk)[-5:]
    finally:
        writer.close()


def _complete(rhead: bytes, relayed: _Relayed) -> bool:
    """The whole answer went to the client: its Content-Length, or a chunked body's last chunk."""
    for line in rhead.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return relayed.size >= int(value.strip())
    return relayed.tail == b"0\r\n\r\n"


async def main(listen: int, backends: list[int]) -> None:
    turn = itertools.cycle(range(len(backends)))

    async def serve(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            head = await creader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            cwriter.close()
            return
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        body = await creader.readexactly(length) if length else b""
        index = next(turn)
        what = f"{head.split(b' ', 1)[0].decode()} {_what(body)}"
        print(index, what, flush=True)  # in the order requests are sent on
        try:
            breader, bwriter = await asyncio.open_connection("127.0.0.1", backends[index])
        except OSError:
            cwriter.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            cwriter.close()
            return
        bwriter.write(_rewrite(head) + body)
        await bwriter.drain()
        try:
            rhead = await breader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            cwriter.close()
            bwriter.close()
            return
        cwriter.write(_rewrite(rhead))
        watch = asyncio.ensure_future(creader.read(1))  # the client going away ends the answer
        relayed = _Relayed()
        copy = asyncio.ensure_future(_pipe(breader, cwriter, relayed))
        await asyncio.wait((watch, copy), return_when=asyncio.FIRST_COMPLETED)
        if not _complete(rhead, relayed):  # the client went away before the whole answer reached it
            print("cut", what, flush=True)
        for task in (watch, copy):
            task.cancel()
        bwriter.close()
        cwriter.close()

    server = await asyncio.start_server(serve, "127.0.0.1", listen, limit=MAX_HEAD)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]]))
