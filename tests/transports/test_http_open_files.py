"""The native server at its open-file limit, and its idle keep-alive close.

Past ``RLIMIT_NOFILE`` a connection cannot be accepted, and the event loop closes what it cannot
take without a word (the client reads a reset or an empty reply). The server refuses before that
with a 503 that names the cause; these tests run ``mcpfast serve`` under a low limit and read
what each client gets.
"""

from __future__ import annotations

import json
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _support import child_env, free_port, native_server_thread, stop, wait_port_named, wait_until

from mcpfast.transports.http_server import HttpServer, fd_reserve

pytestmark = [pytest.mark.timeout(60)]

LIMIT = 128
"""The open-file limit the server runs under (soft and hard: it raises its soft limit to the hard one)."""

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()
REQUEST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(INIT), INIT)
)


def reply(sock: socket.socket) -> tuple[int, dict[bytes, bytes], bytes]:
    """One whole response (Content-Length), or raises ``ConnectionError`` naming what came instead."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} bytes of a reply")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
    length = int(headers[b"content-length"])
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed mid-body")
        body += chunk
    return int(lines[0].split()[1]), headers, body


def ask(port: int) -> tuple[socket.socket, tuple[int, dict[bytes, bytes], bytes] | str]:
    """A new connection with an ``initialize`` sent: its reply, or what broke instead."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(REQUEST)
    try:
        return sock, reply(sock)
    except OSError as e:
        return sock, f"{type(e).__name__}: {e}"


@contextmanager
def limited_server(tmp_path: Path, limit: int) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``mcpfast serve`` (the demo app) with an open-file limit of ``limit`` (soft and hard)."""
    port = free_port()
    log = tmp_path / "serve.log"

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    cmd = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port), "--max-connections", "100000"]
    with log.open("wb") as out:
        proc = subprocess.Popen(["timeout", "50", *cmd], env=child_env(), stdout=subprocess.DEVNULL, stderr=out, preexec_fn=lower)
    try:
        wait_port_named(port, proc, "mcpfast serve")
        yield proc, port, log
    finally:
        stop(proc)


def test_past_the_open_file_limit_a_connection_gets_a_503_naming_it_and_the_server_goes_on(tmp_path: Path) -> None:
    held: list[socket.socket] = []
    with limited_server(tmp_path, LIMIT) as (proc, port, log):
        refused: dict[bytes, int] = {}
        other: list[str] = []
        try:
            for _ in range(LIMIT + 20):
                sock, got = ask(port)
                if isinstance(got, str):
                    other.append(got)
                    sock.close()
                elif got[0] == 200:
                    held.append(sock)
                else:
                    status, headers, body = got
                    assert status == 503, got
                    assert headers[b"retry-after"] == b"1" and headers[b"connection"] == b"close"
                    message = json.loads(body)["error"]["message"].encode()
                    refused[message] = refused.get(message, 0) + 1
                    sock.close()  # as a client does after `connection: close`
            # a burst, every connection made before any is answered: named too (fewer than the reserve)
            burst = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(fd_reserve(LIMIT) // 2)]
            for sock in burst:
                sock.sendall(REQUEST)
            for sock in burst:
                try:
                    status, _, body = reply(sock)
                    assert status == 503
                    message = json.loads(body)["error"]["message"].encode()
                    refused[message] = refused.get(message, 0) + 1
                except OSError as e:
                    other.append(f"{type(e).__name__}: {e}")
                sock.close()
            assert not other, f"connections ended without a reply: {other}"
            # every connection the limit leaves room for is served; the last descriptors stay free
            assert LIMIT - fd_reserve(LIMIT) - 24 <= len(held) < LIMIT - fd_reserve(LIMIT)
            assert refused == {b"too many connections (open-file limit 128)": LIMIT + 20 - len(held) + fd_reserve(LIMIT) // 2}
            # the server goes on: once clients leave, new ones are served
            for sock in held:
                sock.close()
            held.clear()

            def served() -> bool:
                sock, got = ask(port)
                sock.close()
                return not isinstance(got, str) and got[0] == 200

            assert wait_until(served, 10)
            assert proc.poll() is None
        finally:
            for sock in held:
                sock.close()
        text = log.read_text()
        assert text.count("refusing new connections with 503: too many connections (open-file limit 128)") == 1, text
        assert "the open-file limit (RLIMIT_NOFILE 128) leaves room for about" in text


class _Plain:
    """A plain ASGI app: 200 ``ok`` to every request."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def test_an_idle_close_does_not_reset_a_request_that_has_arrived() -> None:
    """A keep-alive connection idle past the timeout whose client has just sent its next request
    (in the kernel, not read yet) is served, not closed under the request."""
    server = HttpServer(_Plain(), keepalive_timeout=0.3)

    def in_loop(fn: Any) -> None:
        done = threading.Event()

        def call() -> None:
            fn()
            done.set()

        loop.call_soon_threadsafe(call)
        assert done.wait(5)

    with native_server_thread(server) as (_url, loop):
        assert server.bound is not None
        sock = socket.create_connection(("127.0.0.1", server.bound[1]), timeout=10)
        request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(request)
        assert reply(sock)[0] == 200
        (conn,) = server.connections
        # the loop does not read this connection for a while: its next request waits in the
        # kernel while the connection stays idle past the timeout, as when a close and a
        # request cross
        assert conn.transport is not None
        in_loop(conn.transport.pause_reading)
        sock.sendall(request)
        time.sleep(1.0)  # more than the timeout and the sweeps in it
        in_loop(conn.transport.resume_reading)
        status, _, body = reply(sock)
        assert (status, body) == (200, b"ok")
        # without a request, the idle connection is closed after the timeout
        assert wait_until(lambda: not server.connections, 5)
        sock.settimeout(5)
        assert sock.recv(10) == b""
        sock.close()


def test_the_reserve_is_a_share_of_the_limit_within_bounds() -> None:
    assert fd_reserve(128) == 16
    assert fd_reserve(20_000) == 1_250
    assert fd_reserve(1_048_576) == 2_048
    assert re.fullmatch(r"\d+", str(fd_reserve(1024)))
