"""``parse_http``: HTTP/1.1 request framing for the server's fast path, both implementations."""

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
    requests, used, status, need = core.parse_http(POST)
    assert (used, status, need) == (len(POST), 0, 0)
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
    requests, used, status, need = core.parse_http(data)
    assert [r[0] for r in requests] == ["POST", "DELETE"]
    assert requests[1][4] is False  # Connection: close
    assert (used, status, need) == (len(POST) + len(delete), 0, 0)
    # Head complete, body not: `need` is the whole request's length.
    requests, used, status, need = core.parse_http(POST[:-1])
    assert (requests, used, status, need) == ([], 0, 0, len(POST))


@pytest.mark.parametrize("cut", range(0, len(POST)))
def test_every_split_point(core: ModuleType, cut: int) -> None:
    requests, used, status, _need = core.parse_http(POST[:cut])
    assert (requests, used, status) == ([], 0, 0)


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        b"GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nContent-Length: 1 1\r\n\r\nx",
        b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: b\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\x00c\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        b"GET / HTTP/1.1\nA: b\r\n\r\n",
        b"GET /a b HTTP/1.1\r\n\r\n",
        b"GET /\x7f HTTP/1.1\r\n\r\n",
        b"G(T / HTTP/1.1\r\n\r\n",
        b" GET / HTTP/1.1\r\n\r\n",
        b"\r\nGET / HTTP/1.1\r\n\r\n",
    ],
)
def test_outside_the_fast_subset_falls_back(core: ModuleType, raw: bytes) -> None:
    assert core.parse_http(POST + raw) [1:3] == (len(POST), 1)


def test_limits(core: ModuleType) -> None:
    big = b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n"
    assert core.parse_http(big, 65536, 10)[1:3] == (0, 2)
    assert core.parse_http(big + b"x" * 11, 65536, 11)[2] == 0
    long_head = b"GET / HTTP/1.1\r\nA: " + b"x" * 100
    assert core.parse_http(long_head, 64)[1:3] == (0, 1)  # the full parser answers 431
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
        b"POST /mcp HTTP/1.1\r\n", b"GET / HTTP/1.1\r\n", b"DELETE /x?y HTTP/1.0\r\n", b"Host: a\r\n",
        b"Content-Length: 3\r\n", b"content-length: 0\r\n", b"Connection: close\r\n", b"Connection: keep-alive\r\n",
        b"Transfer-Encoding: chunked\r\n", b"Expect: 100-continue\r\n", b"X: \t v \r\n", b"x: w\r\n", b" fold\r\n",
        b"\r\n", b"abc", b"\n", b"\r", b":", b" ", b"\x00", b"\x7f", b"\xff", b"Content-Length: 99999999999999999\r\n",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=14), st.integers(min_value=0, max_value=40), st.integers(min_value=1, max_value=64))
def test_differential(pieces: list[bytes], max_body: int, max_head: int) -> None:
    if RUST is None:
        pytest.fail("the compiled core is not importable")
    data = b"".join(pieces)
    assert RUST.parse_http(data, max_head * 4, max_body) == PY.parse_http(data, max_head * 4, max_body), data
