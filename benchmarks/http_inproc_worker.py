"""One timing run of ``http_inproc``, run as ``python -c <this file's text>`` inside a source tree.

It imports only ``mcpfast`` (whichever tree is first on ``sys.path``) and the standard library,
so the same worker measures an older checkout that lacks this file. It serves the demo app
through that tree's native HTTP server connection (``http_server._Connection``) on a fake
transport that keeps the written bytes: ``data_received`` with a whole request, the answer read
back from the transport. Arguments (argv): mode (``calls``, ``stateless`` or ``handshakes``) and requests (or
handshake cycles) per run. Each line read from stdin starts one timed run inside the event loop
(``run_until_complete``), answered by one JSON line on stdout (CPU and wall ns per unit).

The event loop is uvloop when it is installed (as for ``mcpfast serve``), else asyncio's.

Environment (``scale_inproc``): ``MCPFAST_INPROC_STORE`` a session store URL (``open_store``;
unset: the transport's default), ``MCPFAST_INPROC_CONNECTIONS`` connections served side by
side (default 1): each step feeds one request to every connection, then waits for every
answer, so a store that group-commits sees that many requests at once.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
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
_STATELESS_VERSION = b"2026-07-28"
_STATELESS_ECHO = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the http benchmark"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"http-inproc","version":"1"}}}}'
)


class _Transport(asyncio.Transport):
    """Keeps what the server writes; never closes anything real."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []
        self.closed = False
        self.written: asyncio.Future[None] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.append(bytes(data))
        if self.written is not None and not self.written.done():
            self.written.set_result(None)

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


def _request(method: bytes, body: bytes, session: bytes | None, *, stateless: bool = False) -> bytes:
    head = [
        method + b" /mcp HTTP/1.1",
        b"Host: 127.0.0.1:8000",
        b"Accept: application/json, text/event-stream",
        b"Content-Type: application/json",
        b"MCP-Protocol-Version: " + (_STATELESS_VERSION if stateless else _VERSION),
    ]
    if stateless:
        head += [b"Mcp-Method: tools/call", b"Mcp-Name: echo"]
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


async def _send_all(pairs: list[tuple[_Connection, _Transport]], requests: list[bytes]) -> list[bytes]:
    """One request to every connection, then every answer (in connection order): one wait for
    all of them, so the loop wakes once per step, not once per connection."""
    for (conn, _), data in zip(pairs, requests, strict=True):
        conn.data_received(data)
    waiting = [transport for _, transport in pairs if not transport.out]
    if waiting:
        everyone = asyncio.get_running_loop().create_future()
        left = [len(waiting)]

        def one_more(_: object) -> None:
            left[0] -= 1
            if left[0] == 0 and not everyone.done():
                everyone.set_result(None)

        for transport in waiting:
            transport.written = asyncio.get_running_loop().create_future()
            transport.written.add_done_callback(one_more)
        try:
            await asyncio.wait_for(everyone, 5.0)
        except TimeoutError:
            raise SystemExit(f"no answer to {requests[0][:80]!r}") from None
        finally:
            for transport in waiting:
                transport.written = None
    return [transport.take() for _, transport in pairs]


def _check(answer: bytes, status: bytes, what: str) -> None:
    if not answer.startswith(b"HTTP/1.1 " + status):
        raise SystemExit(f"{what}: unexpected answer {answer[:300]!r}")


def _app() -> Any:
    url = os.environ.get("MCPFAST_INPROC_STORE")
    if not url:
        return asgi_app(app)
    from mcpfast.store import open_store

    return asgi_app(app, store=open_store(url), max_sessions=1_000_000)


class _Bench:
    def __init__(self, connections: int) -> None:
        self.server = HttpServer(_app())
        self.pairs: list[tuple[_Connection, _Transport]] = []
        for _ in range(connections):
            transport = _Transport()
            conn = _Connection(self.server)
            conn.connection_made(transport)
            self.pairs.append((conn, transport))
        self.sessions: list[bytes] | None = None

    async def handshake(self) -> list[bytes]:
        """A session on every connection: initialize, then notifications/initialized."""
        answers = await _send_all(self.pairs, [_request(b"POST", _INIT, None)] * len(self.pairs))
        for answer in answers:
            _check(answer, b"200", "initialize")
        sessions = [_session_id(answer) for answer in answers]
        for answer in await _send_all(self.pairs, [_request(b"POST", _INITIALIZED, sid) for sid in sessions]):
            _check(answer, b"202", "notifications/initialized")
        return sessions

    async def calls(self, n: int) -> None:
        """``n`` keep-alive tools/call echo requests, shared out over the connections' sessions."""
        if self.sessions is None:
            self.sessions = await self.handshake()
        await self._echoes("calls", [_request(b"POST", _ECHO, sid) for sid in self.sessions], n)

    async def stateless(self, n: int) -> None:
        """``n`` keep-alive 2026-07-28 tools/call echo requests (no session: ``_meta`` and headers)."""
        await self._echoes("stateless", [_request(b"POST", _STATELESS_ECHO, None, stateless=True)] * len(self.pairs), n)

    async def _echoes(self, what: str, requests: list[bytes], n: int) -> None:
        """``requests`` (one per connection) sent until ``n`` echo answers came back, each checked for 200."""
        answers: list[bytes] = []
        ok = done = 0
        while done < n:
            answers = await _send_all(self.pairs, requests)
            ok += sum(answer.startswith(b"HTTP/1.1 200") for answer in answers)
            done += len(answers)
        if ok != done or b"hello from the http benchmark" not in answers[-1]:
            raise SystemExit(f"{what}: {done - ok} of {done} answers not 200; last {answers[-1][:300]!r}")

    async def handshakes(self, n: int) -> None:
        """``n`` session lifecycles (initialize, notifications/initialized, DELETE), shared out."""
        ok = done = 0
        while done < n:
            sessions = await self.handshake()
            answers = await _send_all(self.pairs, [_request(b"DELETE", b"", sid) for sid in sessions])
            ok += sum(answer.startswith(b"HTTP/1.1 2") for answer in answers)
            done += len(answers)
        if ok != done:
            raise SystemExit(f"handshakes: {done - ok} of {done} DELETEs not answered 2xx")


def main() -> None:
    mode, n = sys.argv[1], int(sys.argv[2])
    if not Path(mcpfast.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"mcpfast imported from {mcpfast.__file__}, not from the tree {Path.cwd()}")
    bench = _Bench(int(os.environ.get("MCPFAST_INPROC_CONNECTIONS") or 1))
    loop: asyncio.AbstractEventLoop
    try:  # the loop `mcpfast serve` runs on when it can
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    run = {"calls": bench.calls, "handshakes": bench.handshakes, "stateless": bench.stateless}[mode]
    loop.run_until_complete(run(max(1, n // 4)))  # warm-up
    # as `mcpfast serve` does once started: what is alive now stays out of the collector's way
    gc.collect()
    gc.freeze()
    for _ in sys.stdin:
        c0, w0 = time.process_time_ns(), time.perf_counter_ns()
        loop.run_until_complete(run(n))
        c1, w1 = time.process_time_ns(), time.perf_counter_ns()
        done = -(-n // len(bench.pairs)) * len(bench.pairs)  # whole steps: every connection takes part in each
        sys.stdout.write(json.dumps({"cpu_ns": (c1 - c0) / done, "wall_ns": (w1 - w0) / done, "core": core.IMPLEMENTATION}) + "\n")
        sys.stdout.flush()


main()
