"""Regression tests for the defects a fault campaign found: one test per defect, with its input.

Framing cases run against the native server (the one whose bytes the core's strict parser
judges); the Host, absolute-form and one-answer cases run under every runner we test in
process (native and uvicorn), since those rules live in the shared transport.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import free_port
from test_http_server import INIT, Conn, app, call, post, session

from mcpfast.protocol.host import HostRules, default_allowed_hosts, parse_host
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_server import DEFAULT_MAX_HEAD
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = [pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]


def raw_post(body: bytes, host: bytes | None = b"Host: 127.0.0.1\r\n", target: bytes = b"/mcp", extra: bytes = b"") -> bytes:
    head = b"POST " + target + b" HTTP/1.1\r\n" + (host or b"")
    head += b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + extra
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def answers(c: Conn, quiet: float = 0.3) -> list[int]:
    """Every status the server sends until it closes or stays quiet for ``quiet`` seconds."""
    statuses = []
    c.sock.settimeout(quiet)
    try:
        while True:
            statuses.append(c.response()[0])
    except (TimeoutError, ConnectionError):
        pass
    return statuses


@pytest.fixture(scope="module", params=["native", "uvicorn"])
def any_base(request: pytest.FixtureRequest) -> Iterator[str]:
    with serve_in_thread(asgi_app(app, max_body=4096), server=request.param) as url:
        yield url


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve_in_thread(asgi_app(app, max_body=4096)) as url:
        yield url


# ------------------------------------------------------------------- 1. Host (every runner)


@pytest.mark.parametrize(
    "host",
    [None, b"Host: a\r\nHost: b\r\n", b"Host: exa mple\r\n", b"Host: a/b@c\r\n", b"Host: [zz]\r\n", b"Host: a:99999\r\n"],
)
def test_1_request_without_exactly_one_valid_host_is_400(any_base: str, host: bytes | None) -> None:
    c = Conn(any_base)
    c.send(raw_post(INIT, host=host))
    assert c.response()[0] == 400
    c.close()


def test_1_host_syntax_and_allow_list() -> None:
    assert parse_host(b"127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_host(b"[::1]:1") == ("[::1]", 1)
    assert parse_host(b"Example.COM") == ("example.com", None)
    assert parse_host(b"") == ("", None)  # RFC 9112 §3.2: empty when the target has no authority
    for bad in (b"exa mple", b"a/b@c", b"a, b", b"[::g]", b"a:1:2", b"a%zz", b"\xff"):
        assert parse_host(bad) is None, bad
    rules = HostRules(default_allowed_hosts("127.0.0.1"))
    assert rules.check(b"localhost:8000") is None and rules.check(b"[::1]") is None
    assert rules.check(b"evil.example:8000") == (421, "misdirected request: host not allowed")
    assert rules.check(None) is not None and rules.check(None)[0] == 400
    assert default_allowed_hosts("0.0.0.0") is None and default_allowed_hosts("::1") is not None
    pinned = HostRules(["api.example:443", "other.example:*"])
    assert pinned.check(b"api.example:443") is None and pinned.check(b"api.example:80") is not None
    assert pinned.check(b"other.example:1") is None
    with pytest.raises(ValueError):
        HostRules(["bad host"])


@pytest.mark.parametrize("server", ["native", "uvicorn"])
def test_1_dns_rebinding_host_outside_the_allow_list_is_421(server: str) -> None:
    transport = asgi_app(app, allowed_hosts=default_allowed_hosts("127.0.0.1"))
    with serve_in_thread(transport, server=server) as url:
        c = Conn(url)
        c.send(raw_post(INIT, host=b"Host: evil.example:8000\r\n"))
        assert c.response()[0] == 421
        c.close()
        c = Conn(url)
        c.send(raw_post(INIT, host=b"Host: localhost:%s\r\n" % url.rsplit(":", 1)[1].encode()))
        assert c.response()[0] == 200
        c.close()


# ------------------------------------------------------------------- 2. absolute-form targets


def test_2_absolute_form_target_is_served(any_base: str) -> None:
    c = Conn(any_base)
    c.send(raw_post(INIT, target=any_base.encode() + b"/mcp"))
    status, _headers, body = c.response()
    assert status == 200 and json.loads(body)["result"]["serverInfo"]
    c.close()


# ------------------------------------------------------------------- 3. bytes that are never HTTP


@pytest.mark.parametrize(
    "junk",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(32),  # a TLS ClientHello, no line end
        b"\x00\x01\x02\x03binary junk",
        b"GET /a b c\r\n",  # an invalid request line, no blank line after it
    ],
    ids=["tls-client-hello", "binary", "bad-request-line"],  # random bytes would differ between test workers
)
def test_3_never_http_is_400_and_closed_at_once(base: str, junk: bytes) -> None:
    c = Conn(base)
    c.send(junk)  # the server must not wait for more: these bytes can begin no request
    assert answers(c, quiet=5) == [400]
    assert c.closed()
    c.close()


def test_3_bare_lf_line_ends_are_accepted(base: str) -> None:
    c = Conn(base)
    body = INIT
    c.send(
        b"POST /mcp HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        b"Accept: application/json, text/event-stream\nContent-Length: %d\n\n" % len(body) + body
    )
    assert c.response()[0] == 200
    c.close()


# ------------------------------------------------------------------- 4. head limit while arriving


@pytest.mark.parametrize(("prefix", "status"), [(b"POST /", 414), (b"POST /mcp HTTP/1.1\r\nX-Big: ", 431)])
def test_4_head_limit_holds_while_the_head_arrives(base: str, prefix: bytes, status: int) -> None:
    """A 16 MiB request target (or header line) used to be read to its end before the limit
    was checked. Now the refusal comes once the limit is passed, with the head still unfinished:
    we send 4 times the limit and wait for the answer without sending the rest."""
    c = Conn(base)
    c.send(prefix + b"a" * (4 * DEFAULT_MAX_HEAD))
    assert c.response()[0] == status
    assert c.closed()
    c.close()


# ------------------------------------------------------------------- 5. Upgrade answered once


@pytest.mark.parametrize(
    "upgrade",
    [
        b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n",
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
    ],
)
def test_5_upgrade_is_ignored_and_the_request_answered_once(any_base: str, upgrade: bytes) -> None:
    c = Conn(any_base)
    c.send(raw_post(INIT, extra=upgrade))
    status, _, body = c.response()
    assert status == 200 and json.loads(body)["id"] == 1
    assert answers(c) == []  # nothing unsolicited after it
    c.close()


# ------------------------------------------------------------------- 6. no HTTP version


def test_6_request_line_without_a_version_is_refused_once_and_closed(base: str) -> None:
    c = Conn(base)
    c.send(b"POST /mcp\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
    assert answers(c, quiet=5) == [400]
    assert c.closed()
    c.close()


# ------------------------------------------------------------------- 7. HTTP/1.0 + Transfer-Encoding


def test_7_transfer_encoding_in_http10_is_refused_and_closed(base: str) -> None:
    c = Conn(base)
    c.send(b"POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    assert answers(c, quiet=5) == [400]
    assert c.closed()
    c.close()


@pytest.mark.parametrize("te", [b"gzip", b"chunked, identity", b"chunked, chunked"])
def test_7b_chunked_not_final_or_twice_is_400_and_closed(base: str, te: bytes) -> None:
    """RFC 9112 §6.3: the body's length cannot be known, so 400 and the connection closes."""
    c = Conn(base)
    c.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: " + te + b"\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    assert answers(c, quiet=5) == [400]
    assert c.closed()
    c.close()


# ------------------------------------------------------------------- slowloris: head deadline, cap


def test_a_trickled_head_is_closed_at_its_deadline() -> None:
    with serve_in_thread(asgi_app(app), head_timeout=0.5, keepalive_timeout=60) as url:
        good = Conn(url)
        extra = session(good)
        c = Conn(url)
        request = post(call(3), extra)
        closed_after = None
        for i, byte in enumerate(request):  # one byte every 0.1 s: never idle, never complete in time
            try:
                c.sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed_after = i
                break
            time.sleep(0.1)
            c.sock.setblocking(False)
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                data = None
            c.sock.setblocking(True)
            if data is not None:
                c.buf += data
                closed_after = i
                break
        assert closed_after is not None and closed_after < len(request) - 1
        assert c.buf.startswith(b"HTTP/1.1 408")
        c.close()
        good.send(post(call(4), extra))  # a normal client on the same server is unharmed
        assert json.loads(good.response()[2])["id"] == 4
        good.close()


def test_cli_max_connections_and_default_allowed_hosts() -> None:
    """``mcpfast serve --transport http --max-connections 1`` bound to loopback: a second
    connection gets 503; a rebound name gets 421; the loopback name is served."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port), "--max-connections", "1"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                first = Conn(f"http://127.0.0.1:{port}")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        first.send(raw_post(INIT, host=b"Host: evil.example:%d\r\n" % port))
        assert first.response()[0] == 421
        first.send(raw_post(INIT, host=b"Host: localhost:%d\r\n" % port))
        assert first.response()[0] == 200
        second = Conn(f"http://127.0.0.1:{port}")
        assert second.response()[0] == 503
        second.close()
        first.close()
    finally:
        proc.terminate()
        proc.wait(10)
    assert DEFAULT_MAX_HEAD == 64 * 1024


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_4_head_limit_also_under_asgi_servers(anyio_backend: str) -> None:
    """uvicorn with httptools has no header limit of its own: the transport refuses a head
    over the limit (after the ASGI server buffered it, which only the native server avoids)."""
    import httpx2 as httpx

    transport = asgi_app(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(transport), base_url="http://127.0.0.1") as c:
        r = await c.post("/mcp", content=INIT, headers={"Content-Type": "application/json", "X-Big": "a" * DEFAULT_MAX_HEAD})
        assert r.status_code == 431
        r = await c.post(
            "/mcp", content=INIT, headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        )
        assert r.status_code == 200
    await transport.aclose()


def test_a_head_trickled_byte_by_byte_is_not_reparsed_for_every_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-judging the whole incomplete head on every read made a byte-by-byte head cost O(n^2):
    past 8 KiB the head is judged again only when it doubled, passed the limit or a read may
    end it (below that, every read: a bad byte is refused when it arrives)."""
    import mcpfast.core as core_module

    calls = []
    real = core_module.parse_http

    def counting(*args: object) -> object:
        calls.append(len(args[0]))  # type: ignore[arg-type]
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(core_module, "parse_http", counting)
    # Counted on parse_http, so without the lane (which frames in the same place, after the
    # same decision to judge the head again, but in one native call that cannot be wrapped).
    with serve_in_thread(asgi_app(app), lane=False) as url:
        c = Conn(url)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = raw_post(INIT, extra=b"X-Pad: " + b"p" * 12_000 + b"\r\n")[: -len(INIT)]
        c.send(head[:9000])  # past the size below which every read is judged (8 KiB)
        for byte in head[9000:]:
            c.sock.sendall(bytes([byte]))
            time.sleep(0.0005)
        c.send(INIT)
        assert c.response()[0] == 200
        c.close()
    assert 0 < len(calls) < 100, len(calls)
