"""Differential property tests: the Rust core and the Python twin must agree on every input.

The same inputs go to both implementations; the results (or the errors: type, code and id) must be
identical. Skipped as a whole only when the compiled core is missing AND MCPFAST_ALLOW_NO_RUST=1.
``MCPFAST_DIFF_EXAMPLES=5000`` (default 200) turns the same tests into a longer bug hunt.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfast.core import FrameTooLarge, JsonRpcError, load

try:
    RUST: ModuleType | None = load("rust")
    RUST_ERROR = ""
except ImportError as exc:  # pragma: no cover - depends on the build
    RUST = None
    RUST_ERROR = str(exc)
    if os.environ.get("MCPFAST_ALLOW_NO_RUST", "") == "1":
        pytest.skip(
            "differential tests need the compiled core, which is not importable (MCPFAST_ALLOW_NO_RUST=1 is set)",
            allow_module_level=True,
        )

PY = load("python")

# Shrinking a failure to a minimal example can outlast the suite-wide timeout.
pytestmark = pytest.mark.timeout(600)

# MCPFAST_DIFF_EXAMPLES raises the example count for a long bug hunt (default kept modest).
SETTINGS = settings(
    max_examples=int(os.environ.get("MCPFAST_DIFF_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def rust() -> ModuleType:
    if RUST is None:
        pytest.fail(f"the compiled core is not importable: {RUST_ERROR} (MCPFAST_ALLOW_NO_RUST=1 skips)")
    return RUST


# ----------------------------------------------------------------------------------- views


def norm(value: Any) -> Any:
    """A comparable form that keeps int/float/bool apart, -0.0 apart from 0.0, NaN equal to NaN."""
    if value is None or isinstance(value, str | bytes):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    if isinstance(value, dict):
        return ("dict", tuple((k, norm(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("list", tuple(norm(v) for v in value))
    return ("other", repr(value))


def error_view(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, JsonRpcError):
        return ("JsonRpcError", exc.code, norm(exc.id))
    if isinstance(exc, FrameTooLarge):
        return ("FrameTooLarge", exc.size, exc.limit)
    # orjson.JSONEncodeError, UnicodeEncodeError...: compare the builtin class the contract names
    for base in (TypeError, ValueError):
        if isinstance(exc, base):
            return (base.__name__,)
    return (type(exc).__name__,)


def message_view(m: Any) -> Any:
    if isinstance(m, JsonRpcError):
        return error_view(m)
    return (
        m.kind,
        norm(m.id),
        m.method,
        norm(m.params),
        m.raw_params,
        norm(m.result),
        m.raw_result,
        norm(m.error),
        m.raw,
        norm(m.param("name")),
        norm(m.param("id", "default")),
        norm(m.param("é")),
    )


def message_view_reversed(m: Any) -> Any:
    """The same attributes read in the opposite order (lazy caches must not leak into others)."""
    if isinstance(m, JsonRpcError):
        return error_view(m)
    names = ("raw", "error", "raw_result", "result", "raw_params", "params", "method", "id", "kind")
    got = {name: getattr(m, name) for name in names}
    extra = (norm(m.param("é")), norm(m.param("id", "default")), norm(m.param("name")))
    return (
        got["kind"],
        norm(got["id"]),
        got["method"],
        norm(got["params"]),
        got["raw_params"],
        norm(got["result"]),
        got["raw_result"],
        norm(got["error"]),
        got["raw"],
        *reversed(extra),
    )


def decode_view(out: Any) -> Any:
    if isinstance(out, list):
        return ("batch", tuple(message_view(m) for m in out))
    return message_view(out)


def decode_view_reversed(out: Any) -> Any:
    if isinstance(out, list):
        return ("batch", tuple(message_view_reversed(m) for m in reversed(out))[::-1])
    return message_view_reversed(out)


def outcome(fn: Callable[..., Any], *args: Any, view: Callable[[Any], Any] = norm, **kw: Any) -> Any:
    try:
        return ("ok", view(fn(*args, **kw)))
    except (ValueError, TypeError, OverflowError) as exc:
        return ("raised", error_view(exc))


def item_view(x: Any) -> Any:
    if isinstance(x, FrameTooLarge):
        return ("FTL", x.size, x.limit)
    if isinstance(x, bytes | bytearray):
        return bytes(x)
    return ("event", x.event, x.data, x.id, x.retry)


# ------------------------------------------------------------------- JSON text generation

SAFE_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
KEYS = st.one_of(st.sampled_from(["a", "b", "id", "name", "é", 'k"\\', "\n", "😀"]), SAFE_TEXT)
INTS = st.one_of(
    st.integers(-1000, 1000),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 2**70, -(2**70), 10**30]),
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), INTS, FLOATS, SAFE_TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(KEYS, children, max_size=4),
    ),
    max_leaves=12,
)

SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Writer:
    """Serializes Python values to JSON text in randomly varied (but valid) ways."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd

    def ws(self) -> str:
        return self.rnd.choice(["", "", "", "", " ", "\n", "\t", " \r\n  "])

    def string(self, s: str) -> str:
        out = ['"']
        for ch in s:
            code = ord(ch)
            if ch in SHORT_ESCAPES and (code >= 0x20 or self.rnd.random() < 0.7):
                out.append(SHORT_ESCAPES[ch] if ch in '"\\' or self.rnd.random() < 0.7 else f"\\u{code:04x}")
            elif code < 0x20 or self.rnd.random() < 0.1:
                if code > 0xFFFF:
                    v = code - 0x10000
                    out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04X}")
                else:
                    out.append(f"\\u{code:04x}" if self.rnd.random() < 0.5 else f"\\u{code:04X}")
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)

    def value(self, v: Any) -> str:
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v) if self.rnd.random() < 0.8 else f"{v:e}"
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, Literal):
            return v.text
        if isinstance(v, list):
            if not v:
                return "[" + self.ws() + "]"
            return "[" + ",".join(self.ws() + self.value(x) + self.ws() for x in v) + "]"
        if isinstance(v, dict):
            items = list(v.items())
            if self.rnd.random() < 0.3:
                self.rnd.shuffle(items)
            members = []
            for k, x in items:
                if self.rnd.random() < 0.1:  # a decoy duplicate before the real member
                    members.append(self.member(k, self.rnd.choice([0, "decoy", [1], {"d": None}])))
                members.append(self.member(k, x))
            if not members:
                return "{" + self.ws() + "}"
            return "{" + ",".join(members) + "}"
        raise TypeError(type(v))

    def member(self, k: str, x: Any) -> str:
        return self.ws() + self.string(k) + self.ws() + ":" + self.ws() + self.value(x) + self.ws()

    def document(self, v: Any) -> bytes:
        return (self.ws() + self.value(v) + self.ws()).encode("utf-8", "surrogatepass")


class Literal:
    """Raw JSON text placed as is (float ids like ``1.0``/``1e3``)."""

    def __init__(self, text: str) -> None:
        self.text = text


MISSING = object()

IDS = st.one_of(
    INTS,
    SAFE_TEXT,
    st.sampled_from([None, True, False, Literal("1.0"), Literal("1e3"), Literal("-0"), Literal("-0.0"), []]),
    st.just(MISSING),
)
VALID_ERROR = st.fixed_dictionaries({"code": INTS, "message": SAFE_TEXT}, optional={"data": JSON_VALUES})
ERRORS = st.one_of(
    VALID_ERROR,
    VALID_ERROR,
    VALID_ERROR,
    VALID_ERROR,
    st.fixed_dictionaries({"code": st.one_of(st.booleans(), FLOATS, SAFE_TEXT), "message": SAFE_TEXT}),
    st.fixed_dictionaries({"code": INTS}),
    JSON_VALUES,
)
PARAMS = st.one_of(
    st.dictionaries(KEYS, JSON_VALUES, max_size=4),
    st.dictionaries(KEYS, JSON_VALUES, max_size=4),
    st.lists(JSON_VALUES, max_size=4),
    JSON_VALUES,
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["request", "notification", "result", "error"] * 3 + ["junk"]))
    msg: dict[str, Any] = {}
    msg["jsonrpc"] = draw(st.sampled_from(["2.0"] * 20 + ["1.0", 2.0, MISSING]))
    if kind in ("request", "result", "error"):
        msg["id"] = draw(st.one_of(INTS, SAFE_TEXT) if draw(st.integers(0, 5)) else IDS)
    if kind in ("request", "notification"):
        msg["method"] = draw(st.one_of(SAFE_TEXT, st.sampled_from(["tools/call", "initialize"])))
        if draw(st.booleans()):
            msg["params"] = draw(PARAMS)
    if kind == "result":
        msg["result"] = draw(JSON_VALUES)
    if kind == "error":
        msg["error"] = draw(ERRORS)
    if kind == "junk" or draw(st.integers(0, 9)) == 0:
        for key in draw(st.lists(st.sampled_from(["id", "method", "params", "result", "error", "jsonrpc"]), max_size=3)):
            msg[key] = draw(st.one_of(IDS, JSON_VALUES))
    if draw(st.integers(0, 5)) == 0:
        msg[draw(KEYS)] = draw(JSON_VALUES)  # an extra member
    return {k: v for k, v in msg.items() if v is not MISSING}


DOCUMENTS = st.one_of(
    messages(),
    messages(),
    messages(),
    st.lists(st.one_of(messages(), JSON_VALUES), max_size=4),
    JSON_VALUES,
)


@st.composite
def json_documents(draw: st.DrawFn) -> bytes:
    doc = draw(DOCUMENTS)
    return Writer(draw(st.randoms(use_true_random=False))).document(doc)


@st.composite
def mutated_documents(draw: st.DrawFn) -> bytes:
    data = draw(json_documents())
    how = draw(st.sampled_from(["truncate", "insert", "flip", "delete", "random"]))
    if how == "random":
        return draw(st.binary(max_size=60))
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    if how == "truncate":
        return data[:i]
    if how == "insert":
        b = draw(st.sampled_from(list(b'{}[]",:\\ \n0.-eu') + [0xFF, 0xC3, 0x00]))
        return data[:i] + bytes([b]) + data[i:]
    if how == "delete":
        return data[:i] + data[i + 1 :]
    return data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]


@st.composite
def deep_documents(draw: st.DrawFn) -> tuple[bytes, int]:
    max_depth = draw(st.sampled_from([128, 128, 1, 2, 3, 5, 10]))
    depth = draw(st.integers(max(0, max_depth - 3), max_depth + 2))
    body = "0"
    for _ in range(depth):
        body = draw(st.sampled_from(["[{}]", '{{"k":{}}}', '["s[{{\\"",{}]'])).format(body)
    wrapper = draw(st.sampled_from(["message", "batch", "bare"]))
    if wrapper == "message":
        text = '{"jsonrpc":"2.0","id":1,"method":"m","params":[' + body + "]}"
    elif wrapper == "batch":
        text = '[{"jsonrpc":"2.0","id":1,"result":' + body + "}]"
    else:
        text = body
    return text.encode(), max_depth


@st.composite
def big_documents(draw: st.DrawFn) -> bytes:
    """Messages and batches of several KB (the exact-span scanner then works on large input).

    Built from one drawn seed (large inputs would exhaust Hypothesis' entropy budget); a failure
    reports the data in the assertion message."""
    rnd = random.Random(draw(st.integers(0, 2**64)))
    writer = Writer(rnd)

    def value(depth: int) -> Any:
        r = rnd.random()
        if depth > 3 or r < 0.35:
            return rnd.choice(
                [
                    rnd.randint(-(10 ** rnd.randint(1, 25)), 10 ** rnd.randint(1, 25)),
                    rnd.random() * 10 ** rnd.randint(-8, 300),
                    'é日😀"\\\n'[rnd.randint(0, 6) :] * rnd.randint(0, 300),
                    "x" * rnd.randint(0, 3000),
                    True,
                    None,
                ]
            )
        if r < 0.7:
            return [value(depth + 1) for _ in range(rnd.randint(0, 8))]
        return {rnd.choice(["k", "é", "id", "params"]) + str(i): value(depth + 1) for i in range(rnd.randint(0, 8))}

    def message() -> dict[str, Any]:
        kind = rnd.choice(["request", "result"])
        if kind == "request":
            return {"jsonrpc": "2.0", "id": rnd.randint(0, 2**70), "method": "m", "params": {"a": value(0), "b": value(0)}}
        return {"jsonrpc": "2.0", "id": str(rnd.random()), "result": [value(0) for _ in range(4)]}

    doc: Any = message() if rnd.random() < 0.5 else [message() for _ in range(rnd.randint(1, 12))]
    return writer.document(doc)


# ------------------------------------------------------------------------------- decode


def check_decode(rust: ModuleType, data: bytes, **kw: Any) -> None:
    r = outcome(rust.decode, data, view=decode_view, **kw)
    p = outcome(PY.decode, data, view=decode_view, **kw)
    assert r == p, data
    assert outcome(rust.decode, data, view=decode_view_reversed, **kw) == p, data
    r = outcome(rust.scan_reply, data, **kw)
    p = outcome(PY.scan_reply, data, **kw)
    assert r == p, data


@SETTINGS
@given(json_documents())
def test_decode_valid_json(rust: ModuleType, data: bytes) -> None:
    check_decode(rust, data)


@settings(SETTINGS, max_examples=max(20, SETTINGS.max_examples // 4))
@given(big_documents())
def test_decode_big(rust: ModuleType, data: bytes) -> None:
    check_decode(rust, data)


@SETTINGS
@given(mutated_documents())
def test_decode_mutated(rust: ModuleType, data: bytes) -> None:
    check_decode(rust, data)


@SETTINGS
@given(deep_documents())
def test_decode_depth(rust: ModuleType, case: tuple[bytes, int]) -> None:
    data, max_depth = case
    check_decode(rust, data, max_depth=max_depth)


@SETTINGS
@given(json_documents())
def test_decode_str_input(rust: ModuleType, data: bytes) -> None:
    text = data.decode("utf-8", "surrogatepass")
    assert outcome(rust.decode, text, view=decode_view) == outcome(PY.decode, text, view=decode_view)


# ------------------------------------------------------------------------------ encoders

ENC_TEXT = st.text(max_size=10)  # surrogates included: they must be TypeErrors in both
ENC_INTS = st.one_of(st.integers(-(2**70), 2**70), INTS)
ENC_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), ENC_INTS, st.floats(), ENC_TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(ENC_TEXT, children, max_size=4),
        st.dictionaries(st.integers(0, 3), children, min_size=1, max_size=1),
    ),
    max_leaves=12,
)
ENC_IDS = st.one_of(ENC_INTS, ENC_TEXT, st.sampled_from([True, False, 1.5, None]))


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_float(v) for v in value)
    return False


def compare_encoded(fn: str, rust: ModuleType, args: tuple[Any, ...], value: Any) -> None:
    r = outcome(getattr(rust, fn), *args, view=lambda b: b)
    p = outcome(getattr(PY, fn), *args, view=lambda b: b)
    if r[0] == p[0] == "ok" and has_float(value):
        assert norm(orjson.loads(r[1])) == norm(orjson.loads(p[1])), (fn, args)
    else:
        assert r == p, (fn, args)
    if r[0] == "ok":
        assert b"\n" not in r[1] and b"\r" not in r[1]


@SETTINGS
@given(ENC_IDS, ENC_VALUES)
def test_encode_result(rust: ModuleType, id_: Any, value: Any) -> None:
    compare_encoded("encode_result", rust, (id_, value), value)


@SETTINGS
@given(ENC_IDS, ENC_TEXT, st.one_of(st.none(), ENC_VALUES))
def test_encode_request_and_notification(rust: ModuleType, id_: Any, method: str, params: Any) -> None:
    compare_encoded("encode_request", rust, (id_, method, params), params)
    compare_encoded("encode_notification", rust, (method, params), params)


@SETTINGS
@given(st.one_of(st.none(), ENC_IDS), st.one_of(ENC_INTS, st.booleans()), ENC_TEXT, st.one_of(st.none(), ENC_VALUES))
def test_encode_error(rust: ModuleType, id_: Any, code: Any, message: str, data: Any) -> None:
    compare_encoded("encode_error", rust, (id_, code, message, data), data)


@SETTINGS
@given(ENC_IDS, json_documents())
def test_encode_result_spliced_bytes(rust: ModuleType, id_: Any, body: bytes) -> None:
    compare_encoded("encode_result", rust, (id_, body), None)
    compare_encoded("encode_notification", rust, ("m", body), None)


# ------------------------------------------------------------------------------ framing


@st.composite
def chunked(draw: st.DrawFn, alphabet: list[bytes], max_tokens: int = 60) -> tuple[bytes, list[bytes]]:
    stream = b"".join(draw(st.lists(st.sampled_from(alphabet), max_size=max_tokens)))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    return stream, chunks


FRAMER_ALPHABET = [b"a", b"bc", b"{}", b"\n", b"\n", b"\r", b"\r\n", b"xyzxyzxyz", b"\xff", b" "]


def run_framer(core: ModuleType, chunks: list[bytes], max_size: int) -> list[Any]:
    framer = core.LineFramer(max_size)
    out: list[Any] = []
    for chunk in chunks:
        out.append(([item_view(x) for x in framer.feed(chunk)], framer.buffered))
    out.append(([item_view(x) for x in framer.close()], framer.buffered))
    return out


def flat(steps: list[Any]) -> list[Any]:
    return [item for items, _ in steps for item in items]


@SETTINGS
@given(chunked(FRAMER_ALPHABET), st.one_of(st.integers(1, 12), st.just(4 * 1024 * 1024)))
def test_line_framer(rust: ModuleType, case: tuple[bytes, list[bytes]], max_size: int) -> None:
    stream, chunks = case
    r = run_framer(rust, chunks, max_size)
    p = run_framer(PY, chunks, max_size)
    assert r == p
    assert flat(run_framer(rust, [stream], max_size)) == flat(r)
    assert flat(run_framer(PY, [stream], max_size)) == flat(p)


@SETTINGS
@given(st.lists(st.binary(max_size=20), max_size=10))
def test_frame_lines(rust: ModuleType, msgs: list[bytes]) -> None:
    assert rust.frame_lines(msgs) == PY.frame_lines(msgs)


SSE_ALPHABET = [
    b"data",
    b"data: ",
    b"data:",
    b"id",
    b"id: ",
    b"event: ",
    b"retry: ",
    b":",
    b" ",
    b"\n",
    b"\n",
    b"\r",
    b"\r\n",
    b"x",
    b"12",
    b"99999999999999999999",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xef",
    b"\xc3\xa9",
    b"\xff",
    b"\n\n",
    b"foo",
]


def run_sse(core: ModuleType, chunks: list[bytes], max_event_size: int) -> list[Any]:
    dec = core.SseDecoder(max_event_size)
    out: list[Any] = []
    for chunk in chunks:
        out.append(([item_view(x) for x in dec.feed(chunk)], dec.last_event_id, dec.retry))
    out.append(([item_view(x) for x in dec.close()], dec.last_event_id, dec.retry))
    return out


def flat_sse(steps: list[Any]) -> list[Any]:
    return [item for items, _, _ in steps for item in items] + [steps[-1][1:]]


@SETTINGS
@given(chunked(SSE_ALPHABET, 80), st.one_of(st.integers(1, 40), st.just(4 * 1024 * 1024)))
def test_sse_decoder(rust: ModuleType, case: tuple[bytes, list[bytes]], max_event_size: int) -> None:
    stream, chunks = case
    r = run_sse(rust, chunks, max_event_size)
    p = run_sse(PY, chunks, max_event_size)
    assert r == p
    assert flat_sse(run_sse(rust, [stream], max_event_size)) == flat_sse(r)
    assert flat_sse(run_sse(PY, [stream], max_event_size)) == flat_sse(p)


@SETTINGS
@given(
    st.one_of(ENC_TEXT, st.binary(max_size=20)),
    st.one_of(st.none(), ENC_TEXT),
    st.one_of(st.none(), ENC_TEXT),
    st.one_of(st.none(), st.integers(-3, 2**64)),
)
def test_sse_encoder(rust: ModuleType, data: Any, id_: Any, event: Any, retry: Any) -> None:
    r = outcome(rust.SseEncoder().encode, data, id_, event, retry, view=lambda b: b)
    p = outcome(PY.SseEncoder().encode, data, id_, event, retry, view=lambda b: b)
    assert r == p
    if r[0] == "ok":
        # what the encoder writes, the decoder reads back
        d = PY.SseDecoder()
        (got,) = d.feed(r[1])
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        assert got.data == text.replace("\r\n", "\n").replace("\r", "\n")
    text = data if isinstance(data, str) else ""
    same = lambda b: b  # noqa: E731
    assert outcome(rust.SseEncoder().comment, text, view=same) == outcome(PY.SseEncoder().comment, text, view=same)
    if retry is not None:
        assert outcome(rust.SseEncoder().retry, retry, view=same) == outcome(PY.SseEncoder().retry, retry, view=same)
    burst = [(data, id_), (data, None)]
    assert outcome(rust.SseEncoder().encode_many, burst, view=same) == outcome(PY.SseEncoder().encode_many, burst, view=same)
