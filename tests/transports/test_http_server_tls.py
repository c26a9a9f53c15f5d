"""The native HTTP server under TLS, on asyncio's loop and on uvloop's (``mcpfast serve``'s):
a read costs the request's bytes, not a block of the TLS layer's own read size, from the
first request of a fresh server on; the buffered reads keep every request whole."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvloop
from _support import private_ca
from test_http_server import INIT, app, call, post

from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_server import tls_server_context
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = [pytest.mark.timeout(60)]

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
TLS_LAYER_READ = 256 * 1024
"""What asyncio's and uvloop's TLS layers allocate for each read into a buffer of their own."""


class TlsConn:
    """A blocking TLS client that reads whole Content-Length responses into one preallocated
    buffer (so the client's own reads allocate nothing large)."""

    def __init__(self, port: int, ca: Path) -> None:
        context = ssl.create_default_context(cafile=str(ca))
        self.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="localhost")
        self.buf = bytearray(4 * 1024 * 1024)
        self.view = memoryview(self.buf)
        self.have = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> tuple[int, dict[bytes, bytes], bytes]:
        while (end := self.buf.find(b"\r\n\r\n", 0, self.have)) < 0:
            self._fill()
        lines = bytes(self.buf[:end]).split(b"\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        start = end + 4
        stop = start + int(headers.get(b"content-length", b"0"))
        while self.have < stop:
            self._fill()
        body = bytes(self.buf[start:stop])
        self.buf[: self.have - stop] = self.buf[stop : self.have]
        self.have -= stop
        return int(lines[0].split()[1]), headers, body

    def _fill(self) -> None:
        n = self.sock.recv_into(self.view[self.have :])
        if not n:
            raise ConnectionError("closed before a response")
        self.have += n

    def session(self) -> bytes:
        self.send(post(INIT))
        status, headers, _ = self.response()
        assert status == 200
        extra = b"Mcp-Session-Id: " + headers[b"mcp-session-id"] + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        self.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra))
        assert self.response()[0] == 202
        return extra

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pki")


@pytest.fixture(params=sorted(LOOPS))
def tls_server(request: pytest.FixtureRequest, pki: Path) -> Iterator[tuple[int, Path]]:
    """A fresh server (nothing served before) over TLS on each loop: its port and the CA to trust."""
    files = private_ca(pki)
    tls = tls_server_context(str(files.cert), str(files.key))
    with serve_in_thread(asgi_app(app), loop_factory=LOOPS[request.param], tls=tls) as base:
        yield int(base.rsplit(":", 1)[1]), files.ca


def test_a_read_under_tls_allocates_the_request_not_the_tls_layers_read_size(tls_server: tuple[int, Path]) -> None:
    """The TLS layer decrypts into the server's buffer. Into one of its own, each read was a fresh
    256 KiB block, shrunk: above glibc's mmap threshold (until some block that large happens to
    be freed whole) an ``mmap``, page faults, ``mremap`` and ``munmap`` for every request, about
    twice the rest of a small call's CPU on the first clients of a fresh server."""
    port, ca = tls_server
    conn = TlsConn(port, ca)
    try:
        extra = conn.session()
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            for rid in range(1, 21):
                conn.send(post(call(rid, f"m{rid}"), extra))
                status, _, body = conn.response()
                assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == f"m{rid}"
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak - base < TLS_LAYER_READ // 2, f"{peak - base} bytes at the peak of 20 calls"
    finally:
        conn.close()


def test_requests_larger_than_a_read_and_pipelined_ones_arrive_whole(tls_server: tuple[int, Path]) -> None:
    """A body larger than one read of the buffer arrives in turns; requests sent in one write are
    answered in order."""
    port, ca = tls_server
    conn = TlsConn(port, ca)
    try:
        extra = conn.session()
        large = "x" * (TLS_LAYER_READ * 3 + 17)
        conn.send(post(call(1, large), extra))
        status, _, body = conn.response()
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == large
        conn.send(b"".join(post(call(rid, f"m{rid}"), extra) for rid in range(2, 12)))
        for rid in range(2, 12):
            status, _, body = conn.response()
            reply = json.loads(body)
            assert status == 200 and reply["id"] == rid and reply["result"]["content"][0]["text"] == f"m{rid}"
    finally:
        conn.close()
