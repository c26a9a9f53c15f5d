"""The native HTTP/1.1 server (``mcpfast.transports.http_server``) at the byte level."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _support import native_server_thread

from mcpfast import Context, Server
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_server import HttpServer
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = [pytest.mark.timeout(30)]

app = Server("native-test")


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
async def steps(n: int, ctx: Context) -> str:
    """Report progress n times, then answer (an SSE reply)."""
    for i in range(n):
        await asyncio.sleep(0.01)  # the answer's stream waits (and watches for a disconnect) meanwhile
        ctx.report_progress(i + 1, n)
    return "done"


INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()


def post(body: bytes, extra: bytes = b"", *, length: bool = True) -> bytes:
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += b"Accept: application/json, text/event-stream\r\n" + extra
    if length:
        head += b"Content-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def call(rid: int, text: str = "hi") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    ).encode()


class Conn:
    """A raw client connection that reads whole HTTP/1.1 responses (Content-Length or chunked)."""

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def response(self) -> tuple[int, dict[bytes, bytes], bytes]:
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionError("closed before a response")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        if status < 200:
            return status, headers, b""
        if headers.get(b"transfer-encoding") == b"chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line, 16)
                while len(self.buf) < size + 2:
                    self._fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2 :]
                if size == 0:
                    return status, headers, body
        length = int(headers.get(b"content-length", b"0"))
        while len(self.buf) < length:
            if not self._fill():
                break
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body

    def closed(self) -> bool:
        self.sock.settimeout(5)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve_in_thread(asgi_app(app, max_body=4096)) as url:
        yield url


def session(c: Conn) -> bytes:
    c.send(post(INIT))
    status, headers, _ = c.response()
    assert status == 200
    sid = headers[b"mcp-session-id"]
    extra = b"Mcp-Session-Id: " + sid + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra))
    assert c.response()[0] == 202
    return extra


def test_keep_alive_pipelining_in_order(base: str) -> None:
    c = Conn(base)
    extra = session(c)
    c.send(b"".join(post(call(i, f"m{i}"), extra) for i in range(10)))  # ten requests, one write
    for i in range(10):
        status, headers, body = c.response()
        assert status == 200 and headers[b"content-type"] == b"application/json"
        reply = json.loads(body)
        assert reply["id"] == i and reply["result"]["content"][0]["text"] == f"m{i}"
    c.close()


def test_streamed_answers_one_after_another_on_one_connection(base: str) -> None:
    """Each streamed answer watches for the client going away; finishing one must not end the next."""
    c = Conn(base)
    extra = session(c)
    for rid in (20, 21, 22):
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": rid}},
            }
        ).encode()
        c.send(post(body, extra))
        status, headers, stream = c.response()
        assert status == 200 and headers[b"content-type"] == b"text/event-stream"
        assert stream.count(b'"notifications/progress"') == 2 and b'"id":%d,"result"' % rid in stream
    c.close()


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (post(b"", b"Content-Length: 5000\r\n", length=False), 413),  # max_body is 4096
    ],
)
def test_refusal_pipelined_behind_a_streamed_answer_is_answered_in_turn(base: str, bad: bytes, expected: int) -> None:
    """A streamed answer owns the socket while it runs; requests behind it are answered in order,
    a malformed or oversized one with its status (not a silent close), and then the connection ends."""
    c = Conn(base)
    extra = session(c)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 30,
            "method": "tools/call",
            "params": {"name": "steps", "arguments": {"n": 3}, "_meta": {"progressToken": 30}},
        }
    ).encode()
    c.send(post(body, extra) + post(call(31), extra) + bad)  # one write: stream, plain call, refusal
    status, headers, stream = c.response()
    assert status == 200 and headers[b"content-type"] == b"text/event-stream"
    assert stream.count(b'"notifications/progress"') == 3 and b'"id":30,"result"' in stream
    status, _, reply = c.response()
    assert status == 200 and json.loads(reply)["id"] == 31
    status, headers, _ = c.response()
    assert status == expected and headers.get(b"connection") == b"close"
    assert c.closed()
    c.close()
    other = Conn(base)  # the server is unharmed
    extra = session(other)
    other.send(post(call(32), extra))
    assert json.loads(other.response()[2])["id"] == 32
    other.close()


def test_request_split_into_single_bytes(base: str) -> None:
    c = Conn(base)
    extra = session(c)
    for byte in post(call(5), extra):
        c.send(bytes([byte]))
    status, _, body = c.response()
    assert status == 200 and json.loads(body)["id"] == 5
    c.close()


def test_expect_continue_and_chunked_body_use_the_full_parser(base: str) -> None:
    c = Conn(base)
    extra = session(c)
    body = call(6)
    c.send(post(b"", extra + b"Expect: 100-continue\r\nContent-Length: %d\r\n" % len(body), length=False))
    assert c.response()[0] == 100
    c.send(body)
    status, _, reply = c.response()
    assert status == 200 and json.loads(reply)["id"] == 6
    chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (10, call(7)[:10], len(call(7)) - 10, call(7)[10:])
    c.send(post(b"", extra + b"Transfer-Encoding: chunked\r\n", length=False) + chunked)
    status, _, reply = c.response()
    assert status == 200 and json.loads(reply)["id"] == 7
    # After a fallback the connection keeps working for ordinary requests.
    c.send(post(call(8), extra))
    assert json.loads(c.response()[2])["id"] == 8
    c.close()


def test_body_too_large_is_413_before_the_body(base: str) -> None:
    c = Conn(base)
    c.send(post(b"", b"Content-Length: 5000\r\n", length=False))  # max_body is 4096; no body sent
    status, headers, body = c.response()
    assert status == 413 and headers.get(b"connection") == b"close"
    # The refusal every runner gives (the ASGI path too): a JSON-RPC error body.
    assert headers.get(b"content-type") == b"application/json"
    assert json.loads(body) == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "request body exceeds 4096 bytes"}}
    assert c.closed()
    c.close()


def test_chunked_body_too_large_is_413(base: str) -> None:
    c = Conn(base)
    c.send(post(b"", b"Transfer-Encoding: chunked\r\n", length=False) + b"1000\r\n" + b"x" * 4096 + b"\r\n1\r\nx\r\n")
    assert c.response()[0] == 413
    assert c.closed()
    c.close()


def test_headers_too_large_is_431(base: str) -> None:
    c = Conn(base)
    c.send(b"GET /mcp HTTP/1.1\r\n" + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n")
    assert c.response()[0] == 431
    c.close()


@pytest.mark.parametrize("raw", [b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"])
def test_malformed_is_400_and_closed(base: str, raw: bytes) -> None:
    c = Conn(base)
    c.send(raw)
    assert c.response()[0] == 400
    assert c.closed()
    c.close()


def test_connection_close_and_http10(base: str) -> None:
    c = Conn(base)
    c.send(b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, headers, _ = c.response()
    assert status == 404 and headers[b"connection"] == b"close"
    assert c.closed()
    c.close()
    c = Conn(base)
    c.send(b"GET /nowhere HTTP/1.0\r\nHost: x\r\n\r\n")
    assert c.response()[0] == 404
    assert c.closed()
    c.close()


def test_a_bad_connection_does_not_harm_another(base: str) -> None:
    good = Conn(base)
    extra = session(good)
    bad = Conn(base)
    bad.send(b"\x16\x03\x01 garbage that is not HTTP\r\n\r\n")
    assert bad.response()[0] == 400
    bad.close()
    good.send(post(call(9), extra))
    assert json.loads(good.response()[2])["id"] == 9
    good.close()


def test_sse_stream_is_chunked_and_client_can_vanish(base: str) -> None:
    c = Conn(base)
    extra = session(c)
    c.send(b"GET /mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n" + extra + b"\r\n")
    deadline = time.monotonic() + 5
    while b"\r\n\r\n" not in c.buf and time.monotonic() < deadline:
        c._fill()
    head = c.buf.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 200") and b"transfer-encoding: chunked" in head
    assert b"content-type: text/event-stream" in head
    c.close()  # vanishes mid-stream; the next client is served normally
    c2 = Conn(base)
    session(c2)
    c2.close()


def test_idle_keepalive_timeout_and_connection_cap() -> None:
    class Capped:  # a plain ASGI app, served over ASGI by the native server
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"ok"})

    # idle close after 1.5 s: long enough that a busy machine does not close a or b before the
    # cap is checked, short enough to see it happen within closed()'s 5 s
    server = HttpServer(Capped(), max_connections=2, keepalive_timeout=1.5)
    with native_server_thread(server) as (url, _loop):
        a = Conn(url)
        a.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = a.response()
        assert (status, body) == (200, b"ok") and headers[b"transfer-encoding"] == b"chunked"
        b = Conn(url)
        b.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b.response()[0] == 200
        third = Conn(url)
        assert third.response()[0] == 503  # over the cap: answered and closed
        third.close()
        assert a.closed() and b.closed()  # idle longer than keepalive_timeout
        a.close()
        b.close()
        fresh = Conn(url)  # the cap counts open connections only
        fresh.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert fresh.response()[0] == 200
        fresh.close()


def test_the_idle_sweep_in_slices_closes_every_idle_connection_and_spares_a_busy_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcpfast.transports.http_server as http_server

    monkeypatch.setattr(http_server, "SWEEP_SLICE", 3)  # ten idle connections: four slices a period

    class Ok:
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

    server = HttpServer(Ok(), keepalive_timeout=1.0)
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    with native_server_thread(server) as (url, _loop):
        busy = Conn(url)
        idle = [Conn(url) for _ in range(10)]
        for c in [busy, *idle]:
            c.send(request)
            assert c.response()[0] == 200
        deadline = time.monotonic() + 3.0  # three idle timeouts: every slice has had its turn
        while time.monotonic() < deadline:
            busy.send(request)
            assert busy.response()[0] == 200
            time.sleep(0.1)
        assert all(c.closed() for c in idle)
        busy.send(request)
        assert busy.response()[0] == 200  # in use all along: never idle long enough
        for c in [busy, *idle]:
            c.sock.close()


def test_mounted_in_starlette_over_native() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    transport = asgi_app(app)
    outer = Starlette(routes=[Mount("/api", app=transport)])
    with serve_in_thread(outer) as url:
        c = Conn(url)
        c.send(post(INIT).replace(b"POST /mcp ", b"POST /api/mcp "))
        status, headers, body = c.response()
        assert status == 200 and b"mcp-session-id" in headers
        assert json.loads(body)["result"]["protocolVersion"] == "2025-11-25"
        c.close()


class _Direct:
    """An app the server calls directly: ``/later`` answers over ASGI (a task), the rest at once."""

    direct_http = True
    max_body = 1 << 20

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes, root: str = "") -> Any:
        if path == "/later":

            async def deferred(receive: Any, send: Any) -> None:
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
                await send({"type": "http.response.body", "body": b"later"})

            return deferred
        return (200, [(b"content-type", b"text/plain")], path.encode())


class _Kept(asyncio.Transport):
    """What the server writes, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        assert not self.closed, "a write after close"
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _get(path: str, *extra: bytes) -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + b"".join(extra) + b"\r\n"


def _bodies(data: bytes) -> list[bytes]:
    return [part.split(b"\r\n\r\n", 1)[1][:6] for part in data.split(b"HTTP/1.1 200 OK\r\n")[1:]]


def test_the_replies_of_one_loop_iteration_go_out_in_one_write_in_order() -> None:
    from mcpfast.transports.http_server import _Connection

    async def main() -> None:
        server = HttpServer(_Direct())
        conn, kept = _Connection(server), _Kept()
        conn.connection_made(kept)
        alone, other = _Connection(server), _Kept()
        alone.connection_made(other)
        alone.data_received(_get("/x"))  # (two connections open: each waits for the other's reads)
        conn.data_received(_get("/a") + _get("/b"))
        conn.data_received(_get("/c"))  # another read of the same iteration
        assert kept.writes == []  # held until the loop has handled its reads
        await asyncio.sleep(0)
        assert len(kept.writes) == 1 and _bodies(kept.writes[0]) == [b"/a", b"/b", b"/c"]
        # an answer that writes its own (over ASGI): what came before it goes first, what
        # comes after it waits its turn
        kept.writes.clear()
        conn.data_received(_get("/d") + _get("/later") + _get("/e"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert _bodies(b"".join(kept.writes)) == [b"/d", b"later", b"/e"]
        assert _bodies(kept.writes[0]) == [b"/d"]
        # a closing request: its reply goes out before the close
        kept.writes.clear()
        conn.data_received(_get("/f") + _get("/g", b"Connection: close\r\n"))
        assert kept.closed and _bodies(b"".join(kept.writes)) == [b"/f", b"/g"] and len(kept.writes) == 1
        # alone, a connection has no other read to wait for: written at once
        assert other.writes and _bodies(b"".join(other.writes)) == [b"/x"]
        alone.connection_lost(None)
        conn.connection_lost(None)  # (closed: the transport says so)
        conn, kept = _Connection(server), _Kept()
        conn.connection_made(kept)
        conn.data_received(_get("/h"))
        assert _bodies(b"".join(kept.writes)) == [b"/h"]

    asyncio.run(main())
