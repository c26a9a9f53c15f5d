"""One timing run of ``http_inproc``, run as ``python -c <this file's text>`` inside a source tree.

It imports only ``mcpfast`` (whichever tree is first on ``sys.path``) and the standard library,
so the same worker measures an older checkout that lacks this file. It serves the demo app
through that tree's native HTTP server connection (``http_server._Connection``) on a fake
transport that keeps the written bytes: ``data_received`` with a whole request, the answer read
back from the transport. Arguments (argv): mode (``calls`` or ``handshakes``) and requests (or
handshake cycles) per run. Each line read from stdin starts one timed run inside the event loop
(``run_until_complete``), answered by one JSON line on stdout (CPU and wall ns per unit).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import mcpfast
from mcpfast import core
from mcpfast.server.demo import app
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_server import HttpServer, _Connection

_VERSION = b"2025-11-25"
_ECHO = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the http benchmark"}}}'
_INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"http-inproc","version":"1"}}}'
)
_INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


class _Transport(asyncio.Transport):
    """Keeps what the server writes; never closes anything real."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.append(bytes(data))

    def take(self) -> bytes:
        data = b"".join(self.out)
        self.out.clear()
        return data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _request(method: bytes, body: bytes, session: bytes | None) -> bytes:
    head = [
        method + b" /mcp HTTP/1.1",
        b"Host: 127.0.0.1:8000",
        b"Accept: application/json, text/event-stream",
        b"Content-Type: application/json",
        b"MCP-Protocol-Version: " + _VERSION,
    ]
    if session is not None:
        head.append(b"Mcp-Session-Id: " + session)
    head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _session_id(answer: bytes) -> bytes:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"mcp-session-id":
            return value.strip()
    raise SystemExit(f"no session id in: {answer[:300]!r}")


async def _send(conn: _Connection, transport: _Transport, data: bytes) -> bytes:
    """Feed one request; the answer (written at once, or after the loop runs a deferred one)."""
    conn.data_received(data)
    spins = 0
    while not transport.out:
        spins += 1
        if spins > 1000:
            raise SystemExit(f"no answer to {data[:80]!r}")
        await asyncio.sleep(0)
    return transport.take()


def _check(answer: bytes, status: bytes, what: str) -> None:
    if not answer.startswith(b"HTTP/1.1 " + status):
        raise SystemExit(f"{what}: unexpected answer {answer[:300]!r}")


class _Bench:
    def __init__(self) -> None:
        self.server = HttpServer(asgi_app(app))
        self.transport = _Transport()
        self.conn = _Connection(self.server)
        self.conn.connection_made(self.transport)
        self.session: bytes | None = None

    async def handshake(self) -> bytes:
        conn, transport = self.conn, self.transport
        answer = await _send(conn, transport, _request(b"POST", _INIT, None))
        _check(answer, b"200", "initialize")
        session = _session_id(answer)
        _check(await _send(conn, transport, _request(b"POST", _INITIALIZED, session)), b"202", "notifications/initialized")
        return session

    async def calls(self, n: int) -> None:
        """``n`` keep-alive tools/call echo requests on one session; the last answer checked."""
        if self.session is None:
            self.session = await self.handshake()
        conn, transport = self.conn, self.transport
        request = _request(b"POST", _ECHO, self.session)
        answer = b""
        ok = 0
        for _ in range(n):
            answer = await _send(conn, transport, request)
            ok += answer.startswith(b"HTTP/1.1 200")
        if ok != n or b"hello from the http benchmark" not in answer:
            raise SystemExit(f"calls: {n - ok} of {n} answers not 200; last {answer[:300]!r}")

    async def handshakes(self, n: int) -> None:
        """``n`` session lifecycles: initialize, notifications/initialized, DELETE."""
        conn, transport = self.conn, self.transport
        ok = 0
        for _ in range(n):
            session = await self.handshake()
            answer = await _send(conn, transport, _request(b"DELETE", b"", session))
            ok += answer.startswith(b"HTTP/1.1 2")
        if ok != n:
            raise SystemExit(f"handshakes: {n - ok} of {n} DELETEs not answered 2xx")


def main() -> None:
    mode, n = sys.argv[1], int(sys.argv[2])
    if not Path(mcpfast.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"mcpfast imported from {mcpfast.__file__}, not from the tree {Path.cwd()}")
    bench = _Bench()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    run = bench.calls if mode == "calls" else bench.handshakes
    loop.run_until_complete(run(max(1, n // 4)))  # warm-up
    for _ in sys.stdin:
        c0, w0 = time.process_time_ns(), time.perf_counter_ns()
        loop.run_until_complete(run(n))
        c1, w1 = time.process_time_ns(), time.perf_counter_ns()
        sys.stdout.write(json.dumps({"cpu_ns": (c1 - c0) / n, "wall_ns": (w1 - w0) / n, "core": core.IMPLEMENTATION}) + "\n")
        sys.stdout.flush()


main()
