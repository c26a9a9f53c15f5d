"""SseEncoder and SseDecoder (WHATWG text/event-stream), against both implementations."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from mcpfast.core import FrameTooLarge


def view(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if isinstance(x, FrameTooLarge):
            out.append(("FTL", x.size, x.limit))
        else:
            out.append((x.event, x.data, x.id, x.retry))
    return out


def run(core: ModuleType, chunks: list[bytes], max_event_size: int | None = None, close: bool = True) -> list[Any]:
    dec = core.SseDecoder() if max_event_size is None else core.SseDecoder(max_event_size)
    out: list[Any] = []
    for chunk in chunks:
        out += dec.feed(chunk)
    if close:
        out += dec.close()
    return view(out)


def ev(data: str, id: str = "", event: str = "message", retry: int | None = None) -> tuple[Any, ...]:
    return (event, data, id, retry)


# -------------------------------------------------------------------------------------- encoder


def test_encode(core: ModuleType) -> None:
    enc = core.SseEncoder()
    assert enc.encode('{"a":1}') == b'data: {"a":1}\n\n'
    assert enc.encode(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert enc.encode("x", id="7") == b"id: 7\ndata: x\n\n"
    assert enc.encode("x", id="7", event="message", retry=3000) == b"id: 7\nevent: message\nretry: 3000\ndata: x\n\n"
    assert enc.encode("x", event="e") == b"event: e\ndata: x\n\n"
    assert enc.encode("x", retry=0) == b"retry: 0\ndata: x\n\n"
    assert enc.encode("x", id="") == b"id: \ndata: x\n\n"


def test_encode_multiline(core: ModuleType) -> None:
    enc = core.SseEncoder()
    assert enc.encode("a\nb") == b"data: a\ndata: b\n\n"
    assert enc.encode("a\r\nb\rc\n") == b"data: a\ndata: b\ndata: c\ndata: \n\n"
    assert enc.encode(b"a\r\n\r\nb") == b"data: a\ndata: \ndata: b\n\n"
    assert enc.encode("\n") == b"data: \ndata: \n\n"
    assert enc.encode("") == b"data: \n\n"
    assert enc.encode(b"") == b"data: \n\n"
    assert enc.encode(" lead") == b"data:  lead\n\n"


def test_encode_unicode(core: ModuleType) -> None:
    assert core.SseEncoder().encode("é😀", id="ü") == "id: ü\ndata: é😀\n\n".encode()


@pytest.mark.parametrize("bad_id", ["a\nb", "a\rb", "a\x00b", "\n"])
def test_encode_bad_id(core: ModuleType, bad_id: str) -> None:
    with pytest.raises(ValueError):
        core.SseEncoder().encode("x", id=bad_id)


@pytest.mark.parametrize("bad_event", ["a\nb", "a\rb", "\r\n"])
def test_encode_bad_event(core: ModuleType, bad_event: str) -> None:
    with pytest.raises(ValueError):
        core.SseEncoder().encode("x", event=bad_event)


def test_encode_event_with_nul_is_allowed(core: ModuleType) -> None:
    assert core.SseEncoder().encode("x", event="a\x00") == b"event: a\x00\ndata: x\n\n"


def test_encode_bad_retry(core: ModuleType) -> None:
    enc = core.SseEncoder()
    with pytest.raises(ValueError):
        enc.encode("x", retry=-1)
    with pytest.raises(TypeError):
        enc.encode("x", retry="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        enc.encode("x", retry=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        enc.retry(-5)
    with pytest.raises(ValueError):
        enc.retry(2**64)
    assert enc.retry(2**64 - 1) == b"retry: 18446744073709551615\n\n"
    with pytest.raises(TypeError):
        enc.retry("5")  # type: ignore[arg-type]


def test_comment_and_retry(core: ModuleType) -> None:
    enc = core.SseEncoder()
    assert enc.comment() == b":\n\n"
    assert enc.comment("") == b":\n\n"
    assert enc.comment("keep-alive") == b": keep-alive\n\n"
    assert enc.comment("a\nb\r\nc") == b": a\n: b\n: c\n\n"
    assert enc.comment("a\n\rb\n") == b": a\n:\n: b\n:\n\n"
    assert enc.retry(1500) == b"retry: 1500\n\n"
    assert enc.retry(0) == b"retry: 0\n\n"


def test_encode_many(core: ModuleType) -> None:
    enc = core.SseEncoder()
    events = [('{"a":1}', "1"), (b"x\ny", None), ("", "3")]
    assert enc.encode_many(events) == b"".join(enc.encode(d, i) for d, i in events)
    assert enc.encode_many([]) == b""
    with pytest.raises(ValueError):
        enc.encode_many([("x", "bad\n")])


def test_encoder_decoder_round_trip(core: ModuleType) -> None:
    enc = core.SseEncoder()
    stream = enc.encode("a\nb", id="1", event="t", retry=10) + enc.comment("c") + enc.encode("", id="2")
    assert run(core, [stream]) == [ev("a\nb", "1", "t", 10), ev("", "2")]


# -------------------------------------------------------------------------------------- decoder


def test_decoder_defaults(core: ModuleType) -> None:
    dec = core.SseDecoder()
    assert dec.last_event_id == ""
    assert dec.retry is None
    assert core.DEFAULT_MAX_EVENT == 4 * 1024 * 1024
    for bad in (0, -1):
        with pytest.raises(ValueError):
            core.SseDecoder(bad)


def test_basic(core: ModuleType) -> None:
    dec = core.SseDecoder()
    out = dec.feed(b'event: message\nid: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
    assert view(out) == [ev('{"jsonrpc":"2.0","id":1,"result":{}}', "1")]
    ev0 = out[0]
    assert isinstance(ev0, core.SseEvent)
    assert isinstance(repr(ev0), str)
    with pytest.raises(AttributeError):
        ev0.data = "x"
    assert dec.last_event_id == "1"


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_line_endings(core: ModuleType, eol: bytes) -> None:
    stream = eol.join([b"data: a", b"data: b", b"", b"id: 9", b"data: c", b"", b""])
    assert run(core, [stream]) == [ev("a\nb"), ev("c", "9")]


def test_mixed_line_endings(core: ModuleType) -> None:
    assert run(core, [b"data: a\r\ndata: b\rdata: c\n\r\n"]) == [ev("a\nb\nc")]
    assert run(core, [b"data: a\n\r\n\r\ndata: b\r\r"]) == [ev("a"), ev("b")]


def test_crlf_split_across_chunks(core: ModuleType) -> None:
    # the LF after a chunk-final CR is part of the same line end, not a blank line
    assert run(core, [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [ev("a\nb")]
    assert run(core, [b"data: a\r", b"\r"]) == [ev("a")]
    assert run(core, [b"data: a\r", b"", b"\n", b"\n"]) == [ev("a")]


def test_bom(core: ModuleType) -> None:
    assert run(core, [b"\xef\xbb\xbfdata: x\n\n"]) == [ev("x")]
    assert run(core, [b"\xef", b"\xbb", b"\xbf", b"data: x\n\n"]) == [ev("x")]
    assert run(core, [b"\xef\xbb", b"\xbfdata: x\n\n"]) == [ev("x")]
    # only one BOM, only at the very start: a second one is part of the field name
    assert run(core, [b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n"]) == [ev("y")]
    assert run(core, [b"data: x\n\n\xef\xbb\xbfdata: y\n\n"]) == [ev("x")]
    # a partial BOM is not a BOM
    assert run(core, [b"\xef\xbb", b"data: x\n\ndata: y\n\n"]) == [ev("y")]


def test_comments(core: ModuleType) -> None:
    assert run(core, [b": keep-alive\n\n:\ndata: x\n: inside\n\n"]) == [ev("x")]


def test_field_parsing(core: ModuleType) -> None:
    assert run(core, [b"data:x\n\n"]) == [ev("x")]
    assert run(core, [b"data:  x \n\n"]) == [ev(" x ")]
    assert run(core, [b"data: a:b: c\n\n"]) == [ev("a:b: c")]
    assert run(core, [b"data\n\n"]) == [ev("")]
    assert run(core, [b"data:\n\n"]) == [ev("")]
    assert run(core, [b"data: \n\n"]) == [ev("")]
    assert run(core, [b"data:\ndata:\n\n"]) == [ev("\n")]
    assert run(core, [b"data: a\ndata:\n\n"]) == [ev("a\n")]
    assert run(core, [b"DATA: x\nData: y\ndata : z\nfoo: bar\n\n"]) == []
    assert run(core, [b"data: x\nfoo: bar\nfoo\n\n"]) == [ev("x")]


def test_event_type(core: ModuleType) -> None:
    assert run(core, [b"event: ping\ndata: 1\n\ndata: 2\n\n"]) == [ev("1", event="ping"), ev("2")]
    assert run(core, [b"event:\ndata: 1\n\n"]) == [ev("1")]
    assert run(core, [b"event: a\nevent: b\ndata: 1\n\n"]) == [ev("1", event="b")]
    # a block without data dispatches nothing but resets the type
    assert run(core, [b"event: a\n\ndata: 1\n\n"]) == [ev("1")]


def test_id(core: ModuleType) -> None:
    dec = core.SseDecoder()
    out = dec.feed(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 5\n\n")
    assert view(out) == [ev("a", "1"), ev("b", "1"), ev("c", "")]
    assert dec.last_event_id == "5"
    out = dec.feed(b"id: x\x00y\ndata: d\n\nid:\x00\n\n")
    assert view(out) == [ev("d", "5")]
    assert dec.last_event_id == "5"
    out = dec.feed(b"id:  spaced \ndata: e\n\n")
    assert view(out) == [ev("e", " spaced ")]


@pytest.mark.parametrize(
    "value, expected",
    [
        (b"100", 100),
        (b"0", 0),
        (b"007", 7),
        (b"18446744073709551615", 2**64 - 1),
        (b"18446744073709551616", None),
        (b"000000000000000000001", None),  # 21 digits
        (b"00000000000000000001", 1),  # 20 digits
        (b"", None),
        (b"-1", None),
        (b"+1", None),
        (b"1a", None),
        (b"1.5", None),
        (b" 1", None),
        (b"1 ", None),
        ("١".encode(), None),
    ],
)
def test_retry(core: ModuleType, value: bytes, expected: int | None) -> None:
    dec = core.SseDecoder()
    out = dec.feed(b"retry: " + value + b"\ndata: x\n\ndata: y\n\n")
    assert view(out) == [ev("x", retry=expected), ev("y")]
    assert dec.retry == expected


def test_retry_is_kept_by_the_stream(core: ModuleType) -> None:
    dec = core.SseDecoder()
    assert view(dec.feed(b"retry: 5\n\n")) == []
    assert dec.retry == 5
    assert view(dec.feed(b"retry: x\ndata: a\n\n")) == [ev("a")]
    assert dec.retry == 5
    assert view(dec.feed(b"retry: 7\nretry: 8\ndata: b\n\n")) == [ev("b", retry=8)]
    assert dec.retry == 8


def test_multiline_data(core: ModuleType) -> None:
    assert run(core, [b"data: a\ndata: b\ndata: c\n\n"]) == [ev("a\nb\nc")]
    assert run(core, [b"data: a\n\n\n\ndata: b\n\n"]) == [ev("a"), ev("b")]


def test_utf8(core: ModuleType) -> None:
    text = "é😀 日本".encode()
    assert run(core, [b"data: " + text + b"\n\n"]) == [ev("é😀 日本")]
    assert run(core, [b"data: " + text[:2], text[2:5], text[5:] + b"\n\n"]) == [ev("é😀 日本")]
    assert run(core, [b"data: a\xffb\xc3\ndata: \xe2\x82\n\n"]) == [ev("a\ufffdb\ufffd\n\ufffd")]
    assert run(core, [b"id: \xff\ndata: x\n\n"]) == [ev("x", "\ufffd")]
    assert run(core, [b"event: \xc3\xa9\xff\ndata: x\n\n"]) == [ev("x", event="é\ufffd")]


def test_close(core: ModuleType) -> None:
    dec = core.SseDecoder()
    assert view(dec.feed(b"data: a\n\ndata: incomplete\n")) == [ev("a")]
    assert view(dec.close()) == []  # WHATWG: an incomplete event is discarded
    assert run(core, [b"data: partial"]) == []
    assert run(core, [b"data: x\n"]) == []
    assert run(core, [b""]) == []


def test_empty_chunk_keeps_pending_cr(core: ModuleType) -> None:
    dec = core.SseDecoder()
    steps = [view(dec.feed(c)) for c in (b"data: a\r", b"", b"\n", b"", b"\n")]
    assert steps == [[], [], [], [], [ev("a")]]  # the first LF ends the CR's line, it is no blank line
    assert run(core, [b"id: 1\r", b"", b"\ndata: x\n\n"]) == [ev("x", "1")]


def test_empty_chunk_keeps_block_size(core: ModuleType) -> None:
    chunks = [b"id: 1\r", b"", b"\ndata: 0123456789\r\nid: 2\r\n\r\n"]
    assert run(core, chunks, 12) == [("FTL", 26, 12)]


def test_close_keeps_stream_state(core: ModuleType) -> None:
    dec = core.SseDecoder()
    dec.feed(b"id: 3\nretry: 9\ndata: a\n\n")
    dec.close()
    assert (dec.last_event_id, dec.retry) == ("3", 9)


STREAM = (
    b"\xef\xbb\xbf: hello\r\n"
    b"retry: 1000\r\n\r\n"
    b'id: 1\r\nevent: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n'
    b"data: line1\rdata: line2\r\r"
    b"id: 2\ndata: caf\xc3\xa9\ndata:\n\n"
    b"id: z\x00\nevent: other\ndata: x\n\n"
    b"data: tail-without-blank\n"
)
STREAM_EVENTS = [
    ev('{"jsonrpc":"2.0","id":1,"result":{}}', "1"),
    ev("line1\nline2", "1"),
    ev("café\n", "2"),
    ev("x", "2", "other"),
]


def test_every_split_point(core: ModuleType) -> None:
    assert run(core, [STREAM]) == STREAM_EVENTS
    for i in range(len(STREAM) + 1):
        assert run(core, [STREAM[:i], STREAM[i:]]) == STREAM_EVENTS, i


def test_every_double_split_point(core: ModuleType) -> None:
    part = STREAM[:90]
    expected = run(core, [part])
    for i in range(len(part) + 1):
        for j in range(i, len(part) + 1):
            assert run(core, [part[:i], part[i:j], part[j:]]) == expected, (i, j)


def test_byte_by_byte(core: ModuleType) -> None:
    assert run(core, [STREAM[i : i + 1] for i in range(len(STREAM))]) == STREAM_EVENTS


def test_input_types(core: ModuleType) -> None:
    dec = core.SseDecoder()
    assert view(dec.feed(bytearray(b"data: a\n"))) == []
    assert view(dec.feed(memoryview(b"\n"))) == [ev("a")]


def test_many_events_in_one_chunk(core: ModuleType) -> None:
    enc = core.SseEncoder()
    stream = b"".join(enc.encode(f'{{"i":{i}}}', id=str(i)) for i in range(500))
    out = run(core, [stream])
    assert out == [ev(f'{{"i":{i}}}', str(i)) for i in range(500)]


# ------------------------------------------------------------------------------------- limits


def test_limit(core: ModuleType) -> None:
    assert run(core, [b"data: 1234\n\n"], 10) == [ev("1234")]  # 10 bytes: at the limit
    assert run(core, [b"data: 12345\n\n"], 10) == [("FTL", 11, 10)]
    assert run(core, [b"data: 12\ndata: 34\n\n"], 16) == [ev("12\n34")]
    assert run(core, [b"data: 12\ndata: 345\n\n"], 16) == [("FTL", 17, 16)]
    assert run(core, [b": comment\ndata: 1\n\n"], 12) == [("FTL", 16, 12)]


def test_limit_resyncs(core: ModuleType) -> None:
    stream = b"data: 0123456789\n\ndata: ok\n\n"
    assert run(core, [stream], 10) == [("FTL", 16, 10), ev("ok")]


def test_limit_fields_before_crossing_keep_effect(core: ModuleType) -> None:
    dec = core.SseDecoder(20)
    out = dec.feed(b"id: 1\nretry: 5\nevent: t\ndata: x\n\ndata: y\n\n")  # crosses at "event"
    assert view(out) == [("FTL", 28, 20), ev("y", "1")]
    assert dec.retry == 5
    assert dec.last_event_id == "1"


def test_limit_lines_after_crossing_are_not_interpreted(core: ModuleType) -> None:
    dec = core.SseDecoder(10)
    out = dec.feed(b"data: 0123456789\nid: 2\nretry: 7\nevent: e\n\ndata: y\n\n")
    assert view(out) == [("FTL", 37, 10), ev("y")]
    assert (dec.last_event_id, dec.retry) == ("", None)


def test_limit_partial_line(core: ModuleType) -> None:
    dec = core.SseDecoder(10)
    assert view(dec.feed(b"data: 0123")) == []
    assert view(dec.feed(b"456789")) == []  # crossed: discarding
    assert view(dec.feed(b"abc" * 100)) == []
    assert view(dec.feed(b"\nid: 1\n\ndata: ok\n\n")) == [("FTL", 321, 10), ev("ok")]
    assert dec.last_event_id == ""


def test_limit_close_reports_discarded_block(core: ModuleType) -> None:
    assert run(core, [b"data: 0123456789\n"], 10) == [("FTL", 16, 10)]
    assert run(core, [b"data: 0123456789"], 10) == [("FTL", 16, 10)]
    assert run(core, [b"data: 0123"], 10) == []


def test_limit_every_split_point(core: ModuleType) -> None:
    stream = b"id: 1\r\ndata: 0123456789\r\nid: 2\r\n\r\ndata: abc\r\n\r\n: c\r\ndata: 0123456789xx\r"
    expected = [("FTL", 26, 12), ev("abc", "1"), ("FTL", 21, 12)]
    assert run(core, [stream], 12) == expected
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1):
            assert run(core, [stream[:i], stream[i:j], stream[j:]], 12) == expected, (i, j)


def test_bom_does_not_count(core: ModuleType) -> None:
    assert run(core, [b"\xef\xbb\xbfdata: 1234\n\n"], 10) == [ev("1234")]
