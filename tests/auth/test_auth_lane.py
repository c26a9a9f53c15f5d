"""Bearer tokens on the native server's lane: a token the resource server verified is admitted
by a lookup until its expiry or the keys' next fetch; everything else goes the full path.

The same app is served twice on the native server, with the lane and without it, each behind
its own ``ResourceServer`` trusting one JWKS (served here over loopback HTTP, so a test can
rotate the keys). Every answer, refusals included, must be the same bytes on both (but the
``date`` line); the lane's ``answered`` count says which requests it answered.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfast import Server, core
from mcpfast.auth import JwksSource, ResourceServer
from mcpfast.auth.tokens import mint_token, new_key
from mcpfast.transports.http import HttpTransport, asgi_app
from mcpfast.transports.http_testing import serve_in_thread

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_LANE, reason="the lane is part of the compiled core; the pure-Python core has none"),
]

ISSUER = "https://as.example.test"
RESOURCE = "http://127.0.0.1/mcp"
SCOPE = "mcp:tools"

app = Server("auth-lane-test")


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


class Jwks:
    """A JWKS served over loopback HTTP; ``serve(path)`` changes what it serves (a rotation)."""

    def __init__(self, path: Path) -> None:
        self.body = path.read_bytes()
        jwks = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the stdlib's name
                body = jwks.body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def serve(self, path: Path) -> None:
        self.body = path.read_bytes()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("keys")
    new_key(d / "a.pem", d / "a.json")
    new_key(d / "b.pem", d / "b.json")
    new_key(d / "foreign.pem", d / "foreign.json")
    return {"a": d / "a.pem", "a.jwks": d / "a.json", "b": d / "b.pem", "b.jwks": d / "b.json", "foreign": d / "foreign.pem"}


def token(key: Path, **overrides: Any) -> str:
    args: dict[str, Any] = {"issuer": ISSUER, "audience": RESOURCE, "subject": "alice", "scope": SCOPE, "ttl": 300}
    args.update(overrides)
    return mint_token(key, **args)


class Served:
    def __init__(self, transport: HttpTransport, url: str) -> None:
        self.transport = transport
        self.url = url

    @property
    def answered(self) -> int:
        lane = self.transport.lane
        return -1 if lane is None else lane.answered


class Pair:
    """The app with the lane and without it, behind resource servers trusting one JWKS."""

    def __init__(self, lane: Served, full: Served, jwks: Jwks) -> None:
        self.lane, self.full, self.jwks = lane, full, jwks

    def both(self, request: bytes) -> tuple[bytes, bytes, int]:
        """``request`` on a new connection to each: the two answers (no ``date`` line), and how
        many the lane answered of it."""
        before = self.lane.answered
        got = exchange(self.lane.url, [request])[0]
        answered = self.lane.answered - before
        return got, exchange(self.full.url, [request])[0], answered


def served_pair(jwks: Jwks, *, ttl: float = 300.0, min_refresh: float = 0.0) -> Iterator[Pair]:
    def transport() -> HttpTransport:
        source = JwksSource(jwks.url, ttl=ttl, min_refresh=min_refresh)
        return asgi_app(app, auth=ResourceServer(source, RESOURCE, issuer=ISSUER, scopes=[SCOPE], leeway=0))

    with_lane, without = transport(), transport()
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        assert with_lane.lane is not None and without.lane is None
        yield Pair(Served(with_lane, a), Served(without, b), jwks)


@pytest.fixture
def pair(keys: dict[str, Path]) -> Iterator[Pair]:
    jwks = Jwks(keys["a.jwks"])
    try:
        yield from served_pair(jwks)
    finally:
        jwks.close()


def request(body: bytes | None, auth: str | None, session: bytes | None = None, method: bytes = b"POST") -> bytes:
    head = [method + b" /mcp HTTP/1.1", b"Host: 127.0.0.1", b"Accept: application/json, text/event-stream"]
    if body is not None:
        head.append(b"Content-Type: application/json")
    if auth is not None:
        head.append(b"Authorization: " + auth.encode())
    if session is not None:
        head += [b"Mcp-Session-Id: " + session, b"MCP-Protocol-Version: 2025-11-25"]
    payload = body or b""
    head.append(b"Content-Length: %d" % len(payload))
    return b"\r\n".join(head) + b"\r\n\r\n" + payload


def exchange(url: str, requests: list[bytes]) -> list[bytes]:
    """Each request on one kept-alive connection; each answer as sent, but its ``date`` line."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    out = []
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        buf = b""
        for req in requests:
            sock.sendall(req)
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                assert chunk, "closed before an answer"
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buf) < length:
                chunk = sock.recv(65536)
                assert chunk, "closed in a body"
                buf += chunk
            body, buf = buf[:length], buf[length:]
            kept = [line for line in lines if not line.lower().startswith(b"date:")]
            out.append(b"\r\n".join(kept) + b"\r\n\r\n" + body)
    return out


INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def fields_sorted(answers: list[bytes]) -> list[bytes]:
    """The answers with their header fields in one order (the lane writes the same fields in
    another): where the status line and body are compared, and every field's bytes."""
    out = []
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        status, *fields = head.split(b"\r\n")
        out.append(b"\r\n".join([status, *sorted(fields)]) + b"\r\n\r\n" + body)
    return out


def call(rid: int, text: str = "hi") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    ).encode()


def open_session(served: Served, auth: str) -> bytes:
    """A session of ``auth``'s subject, initialized: its id."""
    import re

    opened = exchange(served.url, [request(INIT, auth)])[0]
    found = re.search(rb"(?im)^mcp-session-id: *(\S+)", opened)
    assert found is not None, opened
    initialized = exchange(served.url, [request(INITIALIZED, auth, found.group(1))])[0]
    assert initialized.startswith(b"HTTP/1.1 202"), initialized
    return found.group(1)


def calls(served: Served, auth: str, sid: bytes, n: int) -> tuple[list[bytes], int]:
    """``n`` echo calls on session ``sid``: the answers, and how many the lane answered."""
    before = served.answered
    got = exchange(served.url, [request(call(i), auth, sid) for i in range(n)])
    return got, served.answered - before


def test_a_verified_token_is_admitted_by_the_lane_with_the_same_replies(pair: Pair, keys: dict[str, Path]) -> None:
    auth = f"Bearer {token(keys['a'])}"
    lane_sid, full_sid = open_session(pair.lane, auth), open_session(pair.full, auth)
    got, answered = calls(pair.lane, auth, lane_sid, 5)
    want, _ = calls(pair.full, auth, full_sid, 5)
    assert fields_sorted(got) == fields_sorted(want)
    assert all(g.startswith(b"HTTP/1.1 200") for g in got)
    assert answered == 5  # the token was verified by the session's initialize: every call is the lane's
    lane = pair.lane.transport.lane
    assert lane is not None and lane.tokens == 1


def test_every_refusal_is_the_full_paths_byte_for_byte(pair: Pair, keys: dict[str, Path]) -> None:
    good = f"Bearer {token(keys['a'])}"
    # a session on each side, and the good token known to the lane
    sids = (open_session(pair.lane, good), open_session(pair.full, good))
    assert calls(pair.lane, good, sids[0], 1)[1] == 1
    refused = {
        "no token": None,
        "another scheme": "Basic YWxpY2U6cHc=",
        "a bearer with no token": "Bearer ",
        "expired": f"Bearer {token(keys['a'], now=time.time() - 1000, ttl=60)}",
        "wrong audience": f"Bearer {token(keys['a'], audience='http://127.0.0.1:9/mcp')}",
        "wrong issuer": f"Bearer {token(keys['a'], issuer='https://evil.test')}",
        "bad signature": f"Bearer {token(keys['foreign'])}",
        "a signature cut short": good[:-4],
        "garbage": "Bearer abc.def.ghi",
        "missing scope": f"Bearer {token(keys['a'], scope='mcp:other')}",
    }
    for why, auth in refused.items():
        for body in (INIT, call(1)):
            lane_req = request(body, auth, sids[0] if body != INIT else None)
            full_req = request(body, auth, sids[1] if body != INIT else None)
            before = pair.lane.answered
            got = exchange(pair.lane.url, [lane_req])[0]
            want = exchange(pair.full.url, [full_req])[0]
            assert pair.lane.answered == before, why
            assert got.split(b" ", 2)[1] in (b"401", b"403"), (why, got)
            assert got == want, why
    # none of them was kept, and the good token still is
    lane = pair.lane.transport.lane
    assert lane is not None and lane.tokens == 1


def test_a_session_is_served_to_its_own_subject_only(pair: Pair, keys: dict[str, Path]) -> None:
    alice, bob = f"Bearer {token(keys['a'])}", f"Bearer {token(keys['a'], subject='bob')}"
    lane_sid, full_sid = open_session(pair.lane, alice), open_session(pair.full, alice)
    open_session(pair.lane, bob)  # bob's token verified and known to the lane
    assert calls(pair.lane, alice, lane_sid, 1)[1] == 1
    got, answered = calls(pair.lane, bob, lane_sid, 2)
    want, _ = calls(pair.full, bob, full_sid, 2)
    assert answered == 0
    assert got == want and got[0].startswith(b"HTTP/1.1 404"), got[0]


def test_a_token_past_its_expiry_is_never_admitted(pair: Pair, keys: dict[str, Path]) -> None:
    short = token(keys["a"], ttl=2)
    exp = json.loads(__import__("base64").urlsafe_b64decode(short.split(".")[1] + "==").decode())["exp"]
    auth = f"Bearer {short}"
    lane_sid, full_sid = open_session(pair.lane, auth), open_session(pair.full, auth)
    assert calls(pair.lane, auth, lane_sid, 1)[1] == 1  # admitted while valid
    while time.time() < exp + 0.05:
        time.sleep(0.05)
    got, answered = calls(pair.lane, auth, lane_sid, 2)
    want, _ = calls(pair.full, auth, full_sid, 2)
    assert answered == 0
    assert got == want
    assert got[0].startswith(b"HTTP/1.1 401") and b'error_description="token expired"' in got[0], got[0]


def test_a_rotated_key_is_noticed_at_the_next_fetch(keys: dict[str, Path]) -> None:
    jwks = Jwks(keys["a.jwks"])
    try:
        for pair in served_pair(jwks, ttl=1.0):
            auth = f"Bearer {token(keys['a'])}"
            sids = (open_session(pair.lane, auth), open_session(pair.full, auth))
            assert calls(pair.lane, auth, sids[0], 2)[1] == 2
            jwks.serve(keys["b.jwks"])  # key a is gone from the issuer's set
            time.sleep(1.2)  # past the keys' time: the next check fetches them
            got, answered = calls(pair.lane, auth, sids[0], 2)
            want, _ = calls(pair.full, auth, sids[1], 2)
            assert answered == 0
            assert got == want
            assert got[0].startswith(b"HTTP/1.1 401") and b'error_description="unknown signing key"' in got[0], got[0]
            lane = pair.lane.transport.lane
            assert lane is not None and lane.tokens == 0
    finally:
        jwks.close()


def test_a_rotation_found_by_another_token_evicts_at_once(keys: dict[str, Path]) -> None:
    jwks = Jwks(keys["a.jwks"])
    try:
        for pair in served_pair(jwks, ttl=300.0):
            old, new = f"Bearer {token(keys['a'])}", f"Bearer {token(keys['b'], subject='bob')}"
            sids = (open_session(pair.lane, old), open_session(pair.full, old))
            assert calls(pair.lane, old, sids[0], 1)[1] == 1
            jwks.serve(keys["b.jwks"])
            # a token of the new key: its unknown kid makes the full path fetch the keys again
            for served in (pair.lane, pair.full):
                open_session(served, new)
            lane = pair.lane.transport.lane
            assert lane is not None and lane.tokens == 1  # bob's alone: alice's went with key a
            got, answered = calls(pair.lane, old, sids[0], 1)
            want, _ = calls(pair.full, old, sids[1], 1)
            assert answered == 0
            assert got == want and got[0].startswith(b"HTTP/1.1 401"), got[0]
    finally:
        jwks.close()


def test_the_lane_keeps_no_token_without_authentication() -> None:
    plain = asgi_app(app)
    with serve_in_thread(plain):
        lane = plain.lane
        assert lane is not None
        assert not lane.learn_token(b"Bearer x", "alice", time.time() + 60)
        assert lane.tokens == 0
