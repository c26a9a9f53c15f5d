"""``parse_http``: strict HTTP/1.x request framing for the server, both implementations."""

from __future__ import annotations

from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfast.core import load

POST = (
    b"POST /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type:  application/json \r\n"
    b"X-Twice: a\r\nx-twice: b\r\nContent-Length: 2\r\n\r\n{}"
)


def test_one_request(core: ModuleType) -> None:
    requests, used, status, need, reason = core.parse_http(POST)
    assert (used, status, need, reason) == (len(POST), 0, 0, "")
    assert requests == [
        (
            "POST",
            b"/mcp?x=1",
            {b"host": b"127.0.0.1", b"content-type": b"application/json", b"x-twice": b"a, b", b"content-length": b"2"},
            b"{}",
            True,
        )
    ]


def test_pipelined_and_partial(core: ModuleType) -> None:
    delete = b"DELETE /mcp HTTP/1.1\r\nConnection: close\r\n\r\n"
    data = POST + delete + POST[:30]
    requests, used, status, need, _ = core.parse_http(data)
    assert [r[0] for r in requests] == ["POST", "DELETE"]
    assert requests[1][4] is False  # Connection: close
    assert (used, status, need) == (len(POST) + len(delete), 0, 0)
    # Head complete, body not: `need` is the whole request's length.
    requests, used, status, need, _ = core.parse_http(POST[:-1])
    assert (requests, used, status, need) == ([], 0, 0, len(POST))


@pytest.mark.parametrize("cut", range(len(POST)))
def test_every_split_point(core: ModuleType, cut: int) -> None:
    requests, used, status, _need, _ = core.parse_http(POST[:cut])
    assert (requests, used, status) == ([], 0, 0)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello: refused at its first byte
        b"\x00\xff\xfe",
        b"G(T / HTTP/1.1\r\n\r\n",
        b" GET / HTTP/1.1\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\n\r\n",
        b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
        b"POST /mcp\r\nHost: a\r\n\r\n",  # no HTTP version
        b"POST /mcp HTTP/2.0\r\n",
        b"GET / HTTP/1.1\rX",
        b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: b\r\n",
        b"GET / HTTP/1.1\r\nA: b\x00c\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nContent-Length: 1 1\r\n\r\nx",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        # chunked not the final coding, or applied twice: the body's length is unknown (RFC 9112 §6.3)
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n",
    ],
)
def test_refused_with_400(core: ModuleType, raw: bytes) -> None:
    requests, used, status, _, reason = core.parse_http(POST + raw)
    assert (len(requests), used, status) == (1, len(POST), 400) and reason


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417),
        (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n", 413),
        (b"GET / HTTP/1.1\r\n" + b"a: b\r\n" * 129 + b"\r\n", 431),
    ],
)
def test_refused_with_other_statuses(core: ModuleType, raw: bytes, status: int) -> None:
    assert core.parse_http(raw)[1:3] == (0, status)


def test_lenient_where_the_rfc_allows(core: ModuleType) -> None:
    # Bare LF line ends and empty lines before the request line (RFC 9112 §2.2).
    (req,), _used, status, _, _ = core.parse_http(b"\r\n\nGET /a HTTP/1.1\nHost: x\n\n")
    assert (req[1], req[2], status) == (b"/a", {b"host": b"x"}, 0)
    # Upgrade is not acted on: a plain request, kept alive.
    (req,), _, status, _, _ = core.parse_http(b"GET / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n")
    assert req[4] is True and status == 0
    # HTTP/1.0: closes unless asked to keep alive.
    assert core.parse_http(b"GET / HTTP/1.0\r\n\r\n")[0][0][4] is False
    assert core.parse_http(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")[0][0][4] is True


def test_chunked_bodies_and_expect(core: ModuleType) -> None:
    head = b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-Trailer: y\r\n\r\n"
    (req,), used, status, _, _ = core.parse_http(head + body)
    assert req[3] == b"Wikipedia" and (used, status) == (len(head + body), 0)
    requests, used, status, _, _ = core.parse_http(head + body + POST)
    assert [r[3] for r in requests] == [b"Wikipedia", b"{}"] and used == len(head + body + POST)
    for cut in range(len(head), len(head + body)):
        assert core.parse_http(head + body[: cut - len(head)])[:3] == ([], 0, 0)
    assert core.parse_http(head + b"65\r\n", 65536, 100)[2] == 413
    expect = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    assert core.parse_http(expect)[1:4] == (0, 100, len(expect) + 2)
    assert core.parse_http(expect + b"{}")[0][0][3] == b"{}"


def test_limits(core: ModuleType) -> None:
    big = b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n"
    assert core.parse_http(big, 65536, 10)[1:3] == (0, 413)
    assert core.parse_http(big + b"x" * 11, 65536, 11)[2] == 0
    # The head limit holds while the head is still arriving: 414 in the request line, 431 after.
    assert core.parse_http(b"GET /" + b"a" * 100, 64)[1:3] == (0, 414)
    long_head = b"GET / HTTP/1.1\r\nA: " + b"x" * 100
    assert core.parse_http(long_head, 64)[1:3] == (0, 431)
    assert core.parse_http(long_head, 4096)[1:3] == (0, 0)  # still arriving


def test_needs_bytes(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.parse_http("GET / HTTP/1.1\r\n\r\n")  # type: ignore[arg-type]


# ------------------------------------------------------------------- differential

PY = load("python")
try:
    RUST: ModuleType | None = load("rust")
except ImportError:  # pragma: no cover - the core fixture reports a missing build
    RUST = None

_PIECES = st.sampled_from(
    [
        b"POST /mcp HTTP/1.1\r\n",
        b"GET / HTTP/1.1\r\n",
        b"DELETE /x?y HTTP/1.0\r\n",
        b"Host: a\r\n",
        b"Content-Length: 3\r\n",
        b"content-length: 0\r\n",
        b"Connection: close\r\n",
        b"Connection: keep-alive\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Expect: 100-continue\r\n",
        b"X: \t v \r\n",
        b"x: w\r\n",
        b" fold\r\n",
        b"\r\n",
        b"abc",
        b"\n",
        b"\r",
        b":",
        b" ",
        b"\x00",
        b"\x7f",
        b"\xff",
        b"Content-Length: 99999999999999999\r\n",
        b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"3\r\nabc\r\n",
        b"0\r\n",
        b"1;x\n",
        b"HTTP/1.",
        b"Upgrade: h2c\r\n",
        b"\xc3\xa9",
        b"\x16\x03\x01",
        b"Expect: nope\r\n",
        b"a b",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=14), st.integers(min_value=0, max_value=40), st.integers(min_value=1, max_value=64))
def test_differential(pieces: list[bytes], max_body: int, max_head: int) -> None:
    if RUST is None:
        pytest.fail("the compiled core is not importable")
    data = b"".join(pieces)
    assert RUST.parse_http(data, max_head * 4, max_body) == PY.parse_http(data, max_head * 4, max_body), data


@pytest.mark.parametrize(
    "te",
    [b"gzip, chunked", b"gzip\r\nTransfer-Encoding: chunked", b"deflate ,chunked"],
)
def test_a_coding_before_chunked_is_501(core: ModuleType, te: bytes) -> None:
    """Framed (chunked is final) but with a coding the server does not decode: 501 (RFC 9112 §6.1)."""
    requests, used, status, _, reason = core.parse_http(POST + b"POST / HTTP/1.1\r\nTransfer-Encoding: " + te + b"\r\n\r\n")
    assert (len(requests), used, status) == (1, len(POST), 501) and reason


def test_chunked_alone_in_any_case_with_empty_elements_frames_the_body(core: ModuleType) -> None:
    raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: , Chunked ,\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    requests, used, status, _, _ = core.parse_http(raw)
    assert status == 0 and used == len(raw) and requests[0][3] == b"{}"
