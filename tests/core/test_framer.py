"""LineFramer and frame_lines (stdio framing), against both implementations."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from mcpfast.core import FrameTooLarge


def view(items: list[Any]) -> list[Any]:
    return [("FTL", x.size, x.limit) if isinstance(x, FrameTooLarge) else bytes(x) for x in items]


def run(core: ModuleType, chunks: list[bytes], max_size: int | None = None) -> list[Any]:
    framer = core.LineFramer() if max_size is None else core.LineFramer(max_size)
    out: list[Any] = []
    for chunk in chunks:
        out += framer.feed(chunk)
    out += framer.close()
    assert framer.buffered == 0
    return view(out)


def test_defaults(core: ModuleType) -> None:
    framer = core.LineFramer()
    assert framer.max_size == core.DEFAULT_MAX_LINE == 4 * 1024 * 1024
    assert framer.buffered == 0
    assert core.LineFramer(10).max_size == 10
    assert core.LineFramer(max_size=3).max_size == 3


@pytest.mark.parametrize("size", [0, -1])
def test_bad_max_size(core: ModuleType, size: int) -> None:
    with pytest.raises(ValueError):
        core.LineFramer(size)


def test_lines(core: ModuleType) -> None:
    framer = core.LineFramer()
    assert view(framer.feed(b'{"a":1}\n{"b":2}\n')) == [b'{"a":1}', b'{"b":2}']
    assert view(framer.feed(b'{"c"')) == []
    assert framer.buffered == 4
    assert view(framer.feed(b":3}\n")) == [b'{"c":3}']
    assert framer.buffered == 0
    assert view(framer.feed(b"")) == []


def test_crlf_and_empty_lines(core: ModuleType) -> None:
    stream = b"a\r\n\r\n\nb\n\r\nc\r\r\nd\re\n  \n"
    assert run(core, [stream]) == [b"a", b"b", b"c\r", b"d\re", b"  "]


def test_crlf_split_across_chunks(core: ModuleType) -> None:
    framer = core.LineFramer()
    assert view(framer.feed(b"abc\r")) == []
    assert framer.buffered == 4
    assert view(framer.feed(b"\ndef\r")) == [b"abc"]
    assert view(framer.feed(b"\r\n")) == [b"def\r"]


def test_input_types(core: ModuleType) -> None:
    framer = core.LineFramer()
    assert view(framer.feed(bytearray(b"a\nb"))) == [b"a"]
    assert view(framer.feed(memoryview(b"c\n"))) == [b"bc"]
    assert all(type(x) is bytes for x in framer.feed(b"x\ny\n"))


STREAM = b'{"jsonrpc":"2.0","id":1}\r\n\n{"x":"\xc3\xa9"}\nlast\r\nxyz\r\n\r\nq'


def test_every_split_point(core: ModuleType) -> None:
    whole = run(core, [STREAM])
    assert whole == [b'{"jsonrpc":"2.0","id":1}', b'{"x":"\xc3\xa9"}', b"last", b"xyz", b"q"]
    for i in range(len(STREAM) + 1):
        assert run(core, [STREAM[:i], STREAM[i:]]) == whole, i
        for j in range(i, len(STREAM) + 1):
            assert run(core, [STREAM[:i], STREAM[i:j], STREAM[j:]]) == whole, (i, j)


def test_byte_by_byte(core: ModuleType) -> None:
    assert run(core, [STREAM[i : i + 1] for i in range(len(STREAM))]) == run(core, [STREAM])


def test_close(core: ModuleType) -> None:
    framer = core.LineFramer()
    framer.feed(b"a\nunterminated")
    assert view(framer.close()) == [b"unterminated"]
    assert framer.buffered == 0
    assert view(framer.close()) == []
    framer.feed(b"tail\r")
    assert view(framer.close()) == [b"tail"]
    framer.feed(b"\r")
    assert view(framer.close()) == []
    assert view(framer.feed(b"again\n")) == [b"again"]


# ------------------------------------------------------------------------------------ oversize


def test_oversize_line_is_reported_and_skipped(core: ModuleType) -> None:
    assert run(core, [b"abcde\nxy\n"], 4) == [("FTL", 5, 4), b"xy"]
    assert run(core, [b"abcd\nabcde\r\nabcd\r\n"], 4) == [b"abcd", ("FTL", 5, 4), b"abcd"]
    assert run(core, [b"ok\n" + b"z" * 100 + b"\nok2\n"], 4) == [b"ok", ("FTL", 100, 4), b"ok2"]


def test_oversize_in_many_chunks(core: ModuleType) -> None:
    framer = core.LineFramer(4)
    assert view(framer.feed(b"ab")) == []
    assert framer.buffered == 2
    assert view(framer.feed(b"cde")) == []
    assert framer.buffered == 0  # known to be too long: discarding
    assert view(framer.feed(b"fgh" * 10)) == []
    assert framer.buffered == 0
    assert view(framer.feed(b"i\r")) == []
    assert view(framer.feed(b"\nnext\n")) == [("FTL", 36, 4), b"next"]


def test_oversize_decided_only_when_known(core: ModuleType) -> None:
    framer = core.LineFramer(4)
    framer.feed(b"abcd\r")  # 5 bytes, but the CR may be half of a CRLF
    assert framer.buffered == 5
    assert view(framer.feed(b"\n")) == [b"abcd"]
    framer.feed(b"abcd\r")
    assert view(framer.feed(b"x\n")) == [("FTL", 6, 4)]
    framer.feed(b"abcd\r")
    assert framer.buffered == 5
    framer.feed(b"\r")
    assert framer.buffered == 0
    assert view(framer.feed(b"\n")) == [("FTL", 5, 4)]


def test_oversize_crlf_split_while_discarding(core: ModuleType) -> None:
    assert run(core, [b"abcdefg\r", b"\nz\n"], 4) == [("FTL", 7, 4), b"z"]
    assert run(core, [b"abcdefg", b"\r", b"\n"], 4) == [("FTL", 7, 4)]


def test_oversize_at_close(core: ModuleType) -> None:
    assert run(core, [b"abcdefg"], 4) == [("FTL", 7, 4)]
    assert run(core, [b"abcdefg\r"], 4) == [("FTL", 7, 4)]
    assert run(core, [b"abcd\r"], 4) == [b"abcd"]


def test_oversize_every_split_point(core: ModuleType) -> None:
    stream = b"12345\r\nabc\r\n" + b"x" * 9 + b"\n\r\nabcd\r\nabcde"
    expected = [("FTL", 5, 4), b"abc", ("FTL", 9, 4), b"abcd", ("FTL", 5, 4)]
    assert run(core, [stream], 4) == expected
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            assert run(core, [stream[:i], stream[i:j], stream[j:]], 4) == expected, (i, j)


def test_limit_one(core: ModuleType) -> None:
    assert run(core, [b"a\nab\n\r\nb\r\n"], 1) == [b"a", ("FTL", 2, 1), b"b"]


def test_frame_too_large_fields() -> None:
    e = FrameTooLarge(10, 4)
    assert (e.size, e.limit) == (10, 4)
    assert isinstance(e, ValueError)


# ---------------------------------------------------------------------------------- frame_lines


def test_frame_lines(core: ModuleType) -> None:
    assert core.frame_lines([]) == b""
    assert core.frame_lines([b"a"]) == b"a\n"
    assert core.frame_lines([b'{"x":1}', b"", b"b"]) == b'{"x":1}\n\nb\n'
    assert core.frame_lines((b"t",)) == b"t\n"
    msgs = [b'{"jsonrpc":"2.0","id":%d}' % i for i in range(100)]
    framed = core.frame_lines(msgs)
    assert framed == b"".join(m + b"\n" for m in msgs)
    assert run(core, [framed]) == msgs
