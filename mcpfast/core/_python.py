"""The pure-Python twin of the compiled core (``mcpfast._core``), built on orjson.

Same names, same behaviour (see ``mcpfast/_core.pyi`` and ``docs/core-contract.md``). It is the
baseline the Rust benchmarks are compared against, so the hot paths avoid per-byte Python work:

* ``decode`` parses once with ``orjson.loads`` and validates with dict look-ups. The exact bytes
  (``raw``, ``raw_params``, ``raw_result``) are found lazily, only when asked, by a small scanner
  that walks the top-level members and lets orjson find where each value ends.
* depth: nesting cannot exceed the number of ``[``/``{`` bytes (counted in C). Only when that
  count is over the limit is the exact check made, also in C: the input wrapped in
  ``1024 - limit`` arrays parses if and only if it nests at most ``limit`` deep (orjson's own
  limit is 1024).
* encoders splice ``orjson.dumps`` output into a fixed envelope.
* ``LineFramer`` and ``SseDecoder`` split whole chunks at once (``bytes.split`` / one regex).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from mcpfast._version import __version__  # noqa: F401 - part of the module's surface
from mcpfast.core._errors import FrameTooLarge, JsonRpcError
from mcpfast.protocol.errors import INVALID_REQUEST, PARSE_ERROR

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_EVENT",
    "DEFAULT_MAX_LINE",
    "FrameTooLarge",
    "JsonRpcError",
    "LineFramer",
    "Message",
    "SseDecoder",
    "SseEncoder",
    "SseEvent",
    "StdioLane",
    "auth_param",
    "build_profile",
    "decode",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "frame_lines",
    "parse_http",
    "refusal",
    "scan_reply",
]

build_profile = "python"

DEFAULT_MAX_DEPTH = 128
DEFAULT_MAX_LINE = 4 * 1024 * 1024
DEFAULT_MAX_EVENT = 4 * 1024 * 1024

# orjson refuses input nested deeper than this; a larger max_depth behaves as this one.
_ORJSON_MAX_DEPTH = 1024

_PARSE_ERROR = PARSE_ERROR
_INVALID_REQUEST = INVALID_REQUEST

_loads = orjson.loads
_dumps = orjson.dumps
_JSONDecodeError = orjson.JSONDecodeError
_DUMPS_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME

_MISSING: Any = object()
_MISSING_BAD: Any = object()  # an id that is present but not a valid id (a float literal)

# ----------------------------------------------------------------------------------------------
# Scanning helpers (the rare, exact path)
# ----------------------------------------------------------------------------------------------

# A JSON string token, or one structural character. Numbers, literals and whitespace are skipped.
_TOKEN_RE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]', re.DOTALL)
_WS = b" \t\r\n"

_NOT_OPENERS = bytes(b for b in range(256) if b not in b"[{")


def _exceeds_depth_quick(data: bytes, limit: int) -> bool:
    """A cheap certain case: ``limit + 1`` opening brackets in a row at the very start."""
    return data.lstrip(b" \t\r\n").startswith(b"[" * (limit + 1))


def _value_end(buf: bytes, stop: int, start: int) -> int:
    """End of a value ending before the separator at ``stop`` (trailing whitespace removed)."""
    while stop > start and buf[stop - 1] in _WS:
        stop -= 1
    return stop


_WS_RE = re.compile(rb"[ \t\r\n]*")
_STRING_RE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SEPARATORS = b",]}"
_SMALL_TAIL = 2048


def _skip_ws(buf: bytes, pos: int) -> int:
    return _WS_RE.match(buf, pos).end()  # type: ignore[union-attr]


def _value_stop(buf: bytes, start: int) -> int:
    """Index of the ``,``/``]``/``}`` that follows the JSON value at ``buf[start]``.

    orjson finds it in C: parsing a window that holds the whole value fails with "unexpected
    content" at the separator. A window that cuts the value parses, or fails at its end, and is
    grown (x4), so the cost stays linear in the value size. Short input is scanned token by token.
    """
    n = len(buf)
    if n - start <= _SMALL_TAIL:
        return _token_value_stop(buf, start)  # cheaper than an exception for short input
    view = memoryview(buf)
    window = _SMALL_TAIL
    while True:
        end = start + window
        if end >= n:
            end = n
        try:
            _loads(view[start:end])
        except _JSONDecodeError as exc:
            doc, pos = exc.doc, exc.pos
            if isinstance(doc, str) and 0 <= pos < len(doc):
                offset = pos if doc.isascii() else len(doc[:pos].encode("utf-8", "surrogatepass"))
                stop = start + offset
                if stop < end and buf[stop] in _SEPARATORS:
                    return stop
        if end == n:  # pragma: no cover - the input was validated; keep an exact fallback
            return _token_value_stop(buf, start)
        window *= 4


def _token_value_stop(buf: bytes, start: int) -> int:
    """The same as ``_value_stop``, token by token in Python (fallback)."""
    depth = 0
    for m in _TOKEN_RE.finditer(buf, start):
        c = m.group()[0]
        if c == 0x22:
            continue
        if c in (0x7B, 0x5B):
            depth += 1
        elif c in (0x7D, 0x5D):
            if depth == 0:
                return m.start()
            depth -= 1
        elif c == 0x2C and depth == 0:
            return m.start()
    return len(buf)  # pragma: no cover


def _members(buf: bytes, start: int) -> dict[str, tuple[int, int]]:
    """Spans of the members of the object starting at ``buf[start] == '{'`` (last key wins)."""
    spans: dict[str, tuple[int, int]] = {}
    pos = _skip_ws(buf, start + 1)
    if buf[pos] == 0x7D:  # }
        return spans
    while True:
        m = _STRING_RE.match(buf, pos)
        assert m is not None
        tok = m.group()
        key = _loads(tok) if b"\\" in tok else tok[1:-1].decode()
        value = _skip_ws(buf, _skip_ws(buf, m.end()) + 1)  # past the ':'
        stop = _value_stop(buf, value)
        spans[key] = (value, _value_end(buf, stop, value))
        if buf[stop] == 0x7D:
            return spans
        pos = _skip_ws(buf, stop + 1)


def _elements(buf: bytes, start: int) -> list[tuple[int, int]]:
    """Spans of the elements of the array starting at ``buf[start] == '['``."""
    spans: list[tuple[int, int]] = []
    pos = _skip_ws(buf, start + 1)
    if buf[pos] == 0x5D:  # ]
        return spans
    while True:
        stop = _value_stop(buf, pos)
        spans.append((pos, _value_end(buf, stop, pos)))
        if buf[stop] == 0x5D:
            return spans
        pos = _skip_ws(buf, stop + 1)


def _strip_span(buf: bytes) -> tuple[int, int]:
    start = _skip_ws(buf, 0)
    return start, _value_end(buf, len(buf), start)


# ----------------------------------------------------------------------------------------------
# Message
# ----------------------------------------------------------------------------------------------


class _Batch:
    """The source of a batch; element spans are found once, on the first ``raw`` request."""

    __slots__ = ("buf", "spans")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.spans: list[tuple[int, int]] | None = None

    def span(self, index: int) -> tuple[int, int]:
        spans = self.spans
        if spans is None:
            start, _ = _strip_span(self.buf)
            spans = self.spans = _elements(self.buf, start)
        return spans[index]


class Message:
    """One decoded JSON-RPC message (see ``mcpfast/_core.pyi``)."""

    __slots__ = ("_id", "_index", "_kind", "_method", "_payload", "_src")

    # _payload: params (request/notification), result, or the error dict, by kind.
    # _src: the input bytes (single message) or a _Batch (then _index is the element index).

    def __init__(self, kind: str, id: Any, method: Any, payload: Any, src: Any, index: int) -> None:
        self._kind = kind
        self._id = id
        self._method = method
        self._payload = payload
        self._src = src
        self._index = index

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def id(self) -> int | str | None:
        return self._id

    @property
    def method(self) -> str | None:
        return self._method

    @property
    def params(self) -> Any:
        if self._method is None:
            return None
        p = self._payload
        return None if p is _MISSING else p

    @property
    def result(self) -> Any:
        return self._payload if self._kind == "result" else None

    @property
    def error(self) -> dict[str, Any] | None:
        return self._payload if self._kind == "error" else None

    def _span(self) -> tuple[bytes, int, int]:
        src = self._src
        if type(src) is bytes:
            start, end = _strip_span(src)
            return src, start, end
        start, end = src.span(self._index)
        return src.buf, start, end

    def _member(self, name: str) -> bytes | None:
        buf, start, _ = self._span()
        span = _members(buf, start).get(name)
        return None if span is None else buf[span[0] : span[1]]

    @property
    def raw(self) -> bytes:
        buf, start, end = self._span()
        if start == 0 and end == len(buf):
            return buf
        return buf[start:end]

    def param(self, key: str, default: Any = None) -> Any:
        """``params.get(key, default)`` for an object ``params``; ``default`` otherwise."""
        p = self._payload
        if self._method is None or type(p) is not dict:
            return default
        return p.get(key, default)

    @property
    def raw_params(self) -> bytes | None:
        if self._method is None or self._payload is _MISSING:
            return None
        return self._member("params")

    @property
    def raw_result(self) -> bytes | None:
        if self._kind != "result":
            return None
        return self._member("result")

    def __repr__(self) -> str:
        if self._method is not None:
            return f"Message(kind={self._kind!r}, id={self._id!r}, method={self._method!r})"
        return f"Message(kind={self._kind!r}, id={self._id!r})"


# ----------------------------------------------------------------------------------------------
# decode / scan_reply
# ----------------------------------------------------------------------------------------------


def _to_bytes(data: Any) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as exc:
            raise JsonRpcError(_PARSE_ERROR, f"invalid JSON: {exc}") from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, bytearray, memoryview or str, not {type(data).__name__}")


def _parse(data: Any, max_depth: int) -> tuple[Any, bytes]:
    if max_depth < 1:
        raise ValueError(f"max_depth must be at least 1, not {max_depth}")
    buf = _to_bytes(data)
    limit = max_depth if max_depth < _ORJSON_MAX_DEPTH else _ORJSON_MAX_DEPTH
    # Nesting deeper than ``limit`` needs more than ``2 * limit`` bytes and more than ``limit``
    # opening brackets (both C-fast checks); only then is the exact (slower) check needed.
    if limit < _ORJSON_MAX_DEPTH and len(buf) > 2 * limit and len(buf.translate(None, _NOT_OPENERS)) > limit:
        return _parse_deep(buf, limit), buf
    try:
        return _loads(buf), buf
    except _JSONDecodeError as exc:
        raise _parse_error(exc, limit) from None


def _parse_error(exc: Exception, limit: int) -> JsonRpcError:
    text = str(exc)
    if text.startswith("depth limit exceeded"):
        return JsonRpcError(_PARSE_ERROR, f"nesting exceeds max_depth of {limit}")
    return JsonRpcError(_PARSE_ERROR, f"invalid JSON: {text}")


def _parse_deep(buf: bytes, limit: int) -> Any:
    """Parse with an exact depth check, in C: orjson refuses nesting beyond 1024, so the input
    wrapped in ``1024 - limit`` arrays parses if and only if its own depth is at most ``limit``.
    Each wrapper must then hold exactly one element (else the input was not one JSON value)."""
    k = _ORJSON_MAX_DEPTH - limit
    if _exceeds_depth_quick(buf, limit):
        raise JsonRpcError(_PARSE_ERROR, f"nesting exceeds max_depth of {limit}")
    try:
        obj = _loads(b"".join((b"[" * k, buf, b"]" * k)))
    except _JSONDecodeError as exc:
        raise _parse_error(exc, limit) from None
    for _ in range(k):
        if len(obj) != 1:
            raise JsonRpcError(_PARSE_ERROR, "invalid JSON: not a single JSON value")
        obj = obj[0]
    return obj


def _literal_id(obj_bytes_src: Any, index: int) -> int | None:
    """The exact int of an id that orjson read as a float, or None if it is not an integer."""
    if type(obj_bytes_src) is bytes:
        buf = obj_bytes_src
        start, _ = _strip_span(buf)
    else:
        buf = obj_bytes_src.buf
        start, _ = obj_bytes_src.span(index)
    span = _members(buf, start).get("id")
    if span is None:  # pragma: no cover
        return None
    lit = buf[span[0] : span[1]]
    if b"." in lit or b"e" in lit or b"E" in lit:
        return None
    return int(lit)


def _invalid(message: str, id: Any) -> JsonRpcError:
    return JsonRpcError(_INVALID_REQUEST, message, id)


_ERR_NOT_OBJECT = "a JSON-RPC message must be an object"
_ERR_JSONRPC = '"jsonrpc" must be exactly "2.0"'
_ERR_ID = '"id" must be a string or an integer'
_ERR_ID_NULL = '"id" may be null only in an error reply'
_ERR_METHOD = '"method" must be a string'
_ERR_REQ_REPLY = 'a request must not carry "result" or "error"'
_ERR_PARAMS = '"params" must be an object or an array'
_ERR_NO_ID = 'a reply must have an "id"'
_ERR_ONE_OF = 'a reply must have exactly one of "result" and "error"'
_ERR_ERROR = '"error" must be an object with an integer "code" and a string "message"'


def _message(obj: Any, src: Any, index: int) -> Message | JsonRpcError:
    """Validate one parsed message; returns the Message or the JsonRpcError (not raised)."""
    if type(obj) is not dict:
        return _invalid(_ERR_NOT_OBJECT, None)
    get = obj.get
    id_ = get("id", _MISSING)
    t = type(id_)
    if t is int or t is str:
        id_ok = True
    elif t is float:
        lit = _literal_id(src, index)
        id_ok = lit is not None
        id_ = lit if id_ok else _MISSING_BAD
    else:
        id_ok = False
    err_id = id_ if id_ok else None
    if get("jsonrpc") != "2.0":
        return _invalid(_ERR_JSONRPC, err_id)
    method = get("method", _MISSING)
    if method is not _MISSING:
        if type(method) is not str:
            return _invalid(_ERR_METHOD, err_id)
        if "result" in obj or "error" in obj:
            return _invalid(_ERR_REQ_REPLY, err_id)
        params = get("params", _MISSING)
        if params is not _MISSING and type(params) is not dict and type(params) is not list:
            return _invalid(_ERR_PARAMS, err_id)
        if id_ok:
            return Message("request", id_, method, params, src, index)
        if id_ is _MISSING:
            return Message("notification", None, method, params, src, index)
        return _invalid(_ERR_ID_NULL if id_ is None else _ERR_ID, None)
    if id_ is _MISSING:
        return _invalid(_ERR_NO_ID, None)
    result = get("result", _MISSING)
    error = get("error", _MISSING)
    if (result is _MISSING) == (error is _MISSING):
        return _invalid(_ERR_ONE_OF, err_id)
    if result is not _MISSING:
        if id_ok:
            return Message("result", id_, None, result, src, index)
        return _invalid(_ERR_ID_NULL if id_ is None else _ERR_ID, None)
    if type(error) is not dict or type(error.get("code")) is not int or type(error.get("message")) is not str:
        return _invalid(_ERR_ERROR, err_id)
    if id_ok or id_ is None:
        return Message("error", id_, None, error, src, index)
    return _invalid(_ERR_ID, None)


def decode(data: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> Message | list[Message | JsonRpcError]:
    """Decode and validate one JSON-RPC 2.0 message or batch (see ``_core.pyi``)."""
    obj, buf = _parse(data, max_depth)
    if type(obj) is dict:
        msg = _message(obj, buf, -1)
        if type(msg) is Message:
            return msg
        raise msg  # type: ignore[misc]
    if type(obj) is list:
        if not obj:
            raise JsonRpcError(_INVALID_REQUEST, "empty batch")
        batch = _Batch(buf)
        return [_message(item, batch, i) for i, item in enumerate(obj)]
    raise JsonRpcError(_INVALID_REQUEST, _ERR_NOT_OBJECT)


def scan_reply(data: Any, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[int | str | None, bool, int | None]:
    """``(id, is_error, error_code)`` of one reply (see ``_core.pyi``)."""
    obj, buf = _parse(data, max_depth)
    if type(obj) is not dict:
        raise JsonRpcError(_INVALID_REQUEST, "expected a single JSON-RPC reply object")
    msg = _message(obj, buf, -1)
    if type(msg) is not Message:
        raise msg  # type: ignore[misc]
    kind = msg._kind
    if kind == "result":
        return msg._id, False, None
    if kind == "error":
        return msg._id, True, msg._payload["code"]
    raise JsonRpcError(_INVALID_REQUEST, f"expected a reply, got a {kind}", msg._id)


# ----------------------------------------------------------------------------------------------
# Encoders
# ----------------------------------------------------------------------------------------------

_CRLF_TO_SPACE = bytes.maketrans(b"\r\n", b"  ")


def _default(obj: Any) -> Any:
    # orjson handles str/int/dict/list subclasses natively, not float or tuple subclasses.
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def _plain_keys(value: Any) -> Any:
    """A copy of ``value`` whose str-subclass dict keys are plain str (orjson refuses them)."""
    if isinstance(value, dict):
        return {(str.__str__(k) if isinstance(k, str) else k): _plain_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_keys(v) for v in value]
    return value


def _dump(value: Any) -> bytes:
    try:
        return _dumps(value, default=_default, option=_DUMPS_OPTS)
    except TypeError as exc:
        if str(exc) != "Dict key must be str":
            raise
    return _dumps(_plain_keys(value), default=_default, option=_DUMPS_OPTS)


def _value(value: Any) -> bytes:
    if isinstance(value, bytes):
        if b"\n" in value or b"\r" in value:
            return value.translate(_CRLF_TO_SPACE)
        return bytes(value) if type(value) is not bytes else value
    return _dump(value)


def _id_bytes(id: Any) -> bytes:
    t = type(id)
    if t is int:
        return b"%d" % id
    if t is str:
        return _dumps(id)
    if isinstance(id, bool):
        raise TypeError("an id must be a str or an int, not bool")
    if isinstance(id, int):
        return b"%d" % id
    if isinstance(id, str):
        return _dumps(id)
    raise TypeError(f"an id must be a str or an int, not {t.__name__}")


def _method_bytes(method: Any) -> bytes:
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, not {type(method).__name__}")
    return _dumps(method)


def encode_request(id: Any, method: str, params: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"method":…,"params":…}``; params omitted when ``None``."""
    head = b'{"jsonrpc":"2.0","id":' + _id_bytes(id) + b',"method":' + _method_bytes(method)
    if params is None:
        return head + b"}"
    return b"".join((head, b',"params":', _value(params), b"}"))


def encode_notification(method: str, params: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","method":…,"params":…}``; params omitted when ``None``."""
    head = b'{"jsonrpc":"2.0","method":' + _method_bytes(method)
    if params is None:
        return head + b"}"
    return b"".join((head, b',"params":', _value(params), b"}"))


def encode_result(id: Any, result: Any) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"result":…}``; a bytes result is spliced as it is."""
    return b"".join((b'{"jsonrpc":"2.0","id":', _id_bytes(id), b',"result":', _value(result), b"}"))


def encode_error(id: Any, code: int, message: str, data: Any = None) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}``."""
    idb = b"null" if id is None else _id_bytes(id)
    if not isinstance(code, int) or isinstance(code, bool):
        raise TypeError(f"code must be an int, not {type(code).__name__}")
    if not isinstance(message, str):
        raise TypeError(f"message must be a str, not {type(message).__name__}")
    parts = [b'{"jsonrpc":"2.0","id":', idb, b',"error":{"code":', _dumps(int(code)), b',"message":', _dumps(message)]
    if data is not None:
        parts.append(b',"data":')
        parts.append(_dump(data))
    parts.append(b"}}")
    return b"".join(parts)


# ----------------------------------------------------------------------------------------------
# Line framing (stdio)
# ----------------------------------------------------------------------------------------------


class LineFramer:
    """Splits a byte stream into newline-delimited messages (see ``_core.pyi``)."""

    __slots__ = ("_discard", "_dlast_cr", "_dsize", "_max", "_pending")

    def __init__(self, max_size: int = DEFAULT_MAX_LINE) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, not {max_size}")
        self._max = max_size
        self._pending = bytearray()  # the incomplete line
        self._discard = False  # dropping an oversized line up to its LF
        self._dsize = 0  # bytes of the oversized line seen so far
        self._dlast_cr = False  # the last of them was a CR

    @property
    def max_size(self) -> int:
        return self._max

    @property
    def buffered(self) -> int:
        return len(self._pending)

    def _check_pending(self) -> None:
        """Switch to discard mode as soon as the pending line is known to be too long."""
        pending = self._pending
        n = len(pending)
        limit = self._max
        # A final CR may still be the first half of a CRLF terminator.
        if n > limit and (n > limit + 1 or pending[-1] != 0x0D):
            self._discard = True
            self._dsize = n
            self._dlast_cr = pending[-1] == 0x0D
            self._pending = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | FrameTooLarge]:
        if type(data) is not bytes:
            data = bytes(data)
        out: list[bytes | FrameTooLarge] = []
        if not data:
            return out
        limit = self._max
        if self._discard:
            nl = data.find(b"\n")
            if nl < 0:
                self._dsize += len(data)
                self._dlast_cr = data[-1] == 0x0D
                return out
            size = self._dsize + nl
            if (data[nl - 1] == 0x0D) if nl else self._dlast_cr:
                size -= 1
            out.append(FrameTooLarge(size, limit))
            self._discard = False
            self._dsize = 0
            self._dlast_cr = False
            data = data[nl + 1 :]
            if not data:
                return out
        if b"\n" not in data:
            self._pending += data
            self._check_pending()
            return out
        if self._pending:
            self._pending += data
            buf = bytes(self._pending)
            self._pending = bytearray()
        else:
            buf = data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        lines = buf.split(b"\n")
        tail = lines.pop()
        if len(buf) <= limit:
            out.extend([line for line in lines if line])
        else:
            for line in lines:
                if line:
                    out.append(line if len(line) <= limit else FrameTooLarge(len(line), limit))
        if tail:
            self._pending = bytearray(tail)
            self._check_pending()
        return out

    def close(self) -> list[bytes | FrameTooLarge]:
        out: list[bytes | FrameTooLarge] = []
        if self._discard:
            out.append(FrameTooLarge(self._dsize - (1 if self._dlast_cr else 0), self._max))
        else:
            tail = bytes(self._pending)
            if tail[-1:] == b"\r":
                tail = tail[:-1]
            if tail:
                out.append(tail if len(tail) <= self._max else FrameTooLarge(len(tail), self._max))
        self._pending = bytearray()
        self._discard = False
        self._dsize = 0
        self._dlast_cr = False
        return out


class StdioLane:
    """The stdio transport's short way for sync tool calls (see ``_core.pyi``). This core
    answers no line itself: it frames, and every line goes to the session machine, which gives
    the replies the compiled lane gives."""

    __slots__ = ("_framer",)

    def __init__(
        self,
        max_line: int,
        run_tool: Callable[[str, Any, str], dict[str, Any] | str | tuple[int, str, Any] | None],
        unencodable_result: Callable[[int | str, BaseException, str], bytes],
        error_reply: Callable[[int | str, int, str, Any, str], bytes],
    ) -> None:
        if max_line < 1:
            raise ValueError("max_line must be at least 1")
        self._framer = LineFramer(max_line)

    def serve(self, version: str, in_flight: Mapping[Any, Any]) -> None:
        """Nothing is answered here, whatever the session."""

    def feed(self, data: bytes) -> bytes | tuple[bytes, list[bytes | FrameTooLarge]]:
        return b"", self._framer.feed(data)

    def close(self) -> bytes | tuple[bytes, list[bytes | FrameTooLarge]]:
        return b"", self._framer.close()

    @property
    def answered(self) -> int:
        return 0


def frame_lines(messages: Sequence[bytes]) -> bytes:
    """Join messages into one newline-terminated write."""
    if not messages:
        return b""
    return b"\n".join(messages) + b"\n"


# ----------------------------------------------------------------------------------------------
# HTTP/1.1 request framing (the server's one judge of a connection's bytes; the rules of the
# Rust core's `http1`, which parses heads with the `httparse` crate: this twin follows it byte
# for byte, refusing at the first byte that cannot belong to a request)
# ----------------------------------------------------------------------------------------------

_TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_URI_BYTE = frozenset(range(0x21, 0x7F)) | frozenset(range(0x80, 0x100))
_VALUE_BYTE = frozenset({0x09}) | frozenset(range(0x20, 0x7F)) | frozenset(range(0x80, 0x100))
_HEX = frozenset(b"0123456789abcdefABCDEF")
_MAX_HEADERS = 128
_HTTP_OK, _HTTP_CONTINUE = 0, 100


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason


class _Partial(Exception):
    pass


def _next(buf: bytes, i: int) -> int:
    if i >= len(buf):
        raise _Partial
    return buf[i]


def _newline(buf: bytes, i: int, reason: str = "invalid line ending") -> int | None:
    """At ``buf[i]``: the index after a CRLF or LF, or ``None`` when it is neither."""
    b = _next(buf, i)
    if b == 0x0A:
        return i + 1
    if b == 0x0D:
        if _next(buf, i + 1) != 0x0A:
            raise _Refused(400, reason)
        return i + 2
    return None


def _http_fields(buf: bytes, i: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """Header fields from ``i`` up to and including the empty line (httparse's rules)."""
    fields: list[tuple[bytes, bytes]] = []
    while True:
        end = _newline(buf, i, "invalid line ending")
        if end is not None:
            return fields, end
        if buf[i] not in _TCHAR:
            raise _Refused(400, "invalid header field name")
        start = i
        while _next(buf, i) in _TCHAR:
            i += 1
        if buf[i] != 0x3A:
            raise _Refused(400, "invalid header field name")
        name = buf[start:i]
        i += 1
        while _next(buf, i) in (0x20, 0x09):
            i += 1
        start = i
        while _next(buf, i) in _VALUE_BYTE:
            i += 1
        value = buf[start:i].rstrip(b" \t")
        end = _newline(buf, i, "invalid header field value")
        if end is None:
            raise _Refused(400, "invalid header field value")
        i = end
        if len(fields) == _MAX_HEADERS:
            raise _Refused(431, "too many header fields")
        fields.append((name, value))


def _http_request_line(buf: bytes, i: int) -> tuple[bytes, bytes, int, int]:
    """``(method, target, version minor, index after the line)``."""
    while True:  # empty lines before the request line are skipped
        b = _next(buf, i)
        if b == 0x0D:
            if _next(buf, i + 1) != 0x0A:
                raise _Refused(400, "invalid line ending")
            i += 2
        elif b == 0x0A:
            i += 1
        else:
            break
    start = i
    if _next(buf, i) not in _TCHAR:
        raise _Refused(400, "invalid request line")
    while True:
        b = _next(buf, i)
        if b == 0x20:
            break
        if b not in _TCHAR:
            raise _Refused(400, "invalid request line")
        i += 1
    method = buf[start:i]
    i += 1
    start = i
    while _next(buf, i) in _URI_BYTE:
        i += 1
    if buf[i] != 0x20 or i == start:
        raise _Refused(400, "invalid request line")
    target = buf[start:i]
    try:
        target.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(400, "invalid request line") from None
    i += 1
    version = buf[i : i + 8]
    if len(version) < 8:
        if not b"HTTP/1.".startswith(version[:7]):
            raise _Refused(400, "not an HTTP/1.x request line (no valid version)")
        raise _Partial
    if version not in (b"HTTP/1.0", b"HTTP/1.1"):
        raise _Refused(400, "not an HTTP/1.x request line (no valid version)")
    end = _newline(buf, i + 8)
    if end is None:
        raise _Refused(400, "invalid line ending")
    return method, target, version[7] - 0x30, end


_TC = rb"!#$%&'*+\-.^_`|~0-9A-Za-z"
_VAL = rb"\t\x20-\x7e\x80-\xff"
_FIELD_RE = re.compile(rb"([" + _TC + rb"]+):[ \t]*([" + _VAL + rb"]*)\r?\n")
_HEAD_RE = re.compile(rb"([" + _TC + rb"]+) ([\x21-\x7e]+) HTTP/1\.([01])\r?\n((?:[" + _TC + rb"]+:[" + _VAL + rb"]*\r?\n)*)\r?\n")
"""A complete head of valid bytes only, in one match: where it matches, the byte walker below
would read exactly the same; anything else (partial, refused, empty lines first) is walked."""


def _too_large(buf: bytes) -> _Refused:
    return _Refused(431, "request head too large") if b"\n" in buf else _Refused(414, "request line too long")


def _http_head(buf: bytes, max_head: int, max_body: int) -> tuple[str, bytes, list[tuple[bytes, bytes]], int, int | None, bool, bool]:
    """The head at the start of ``buf``: ``(method, target, fields, head_len, content_length
    (None: chunked), keep_alive, expect_continue)``; raises ``_Partial`` or ``_Refused``."""
    fast = _HEAD_RE.match(buf)
    try:
        if fast is not None:
            method, target, minor, head_len = fast[1], fast[2], fast[3][0] - 0x30, fast.end()
            fields = [(name, value.rstrip(b" \t")) for name, value in _FIELD_RE.findall(fast[4])]
            if len(fields) > _MAX_HEADERS:
                raise _Refused(431, "too many header fields")
        else:
            method, target, minor, i = _http_request_line(buf, 0)
            fields, head_len = _http_fields(buf, i)
    except _Partial:
        if len(buf) > max_head:
            raise _too_large(buf[:max_head]) from None
        raise
    if head_len > max_head:
        raise _too_large(buf[:max_head])
    if any(b <= 0x20 or b >= 0x7F for b in target):
        raise _Refused(400, "invalid request target")
    http10 = minor == 0
    length: int | None = None
    # Transfer-Encoding over every field of it (one list): sent at all, `chunked` count, whether
    # `chunked` is the final coding, and any other coding.
    transfer_encoding = False
    te_chunked = 0
    te_final_chunked = False
    te_other = False
    keep_alive = not http10
    expect = False
    headers: list[tuple[bytes, bytes]] = []
    for name, raw in fields:
        value = raw.strip(b" \t")
        lower = name.lower()
        if lower == b"content-length":
            if length is not None:
                raise _Refused(400, "more than one Content-Length")
            if not value or not value.isdigit():
                raise _Refused(400, "invalid Content-Length")
            if len(value) > 15:
                raise _Refused(413, "request body too large")
            length = int(value)
        elif lower == b"transfer-encoding":
            transfer_encoding = True
            for coding in value.split(b","):
                coding = coding.strip(b" \t")
                if not coding:
                    continue  # empty list elements do not count (RFC 9110 §5.6.1)
                te_final_chunked = coding.lower() == b"chunked"
                if te_final_chunked:
                    te_chunked += 1
                else:
                    te_other = True
        elif lower == b"connection":
            for token in value.split(b","):
                token = token.strip(b" \t").lower()
                if token == b"close":
                    keep_alive = False
                elif token == b"keep-alive" and http10:
                    keep_alive = True
        elif lower == b"expect":
            if value.lower() != b"100-continue":
                raise _Refused(417, "unsupported expectation")
            expect = True
        headers.append((lower, value))
    if transfer_encoding and http10:
        raise _Refused(400, "Transfer-Encoding in an HTTP/1.0 request")
    if transfer_encoding and length is not None:
        raise _Refused(400, "both Content-Length and Transfer-Encoding")
    if transfer_encoding and (not te_final_chunked or te_chunked > 1):
        # The body's length cannot be known (RFC 9112 §6.3): 400, and the connection closes.
        raise _Refused(400, "chunked must be the final transfer coding, once")
    if te_other:
        # `gzip, chunked`: framed, but with a coding this server does not decode (§6.1).
        raise _Refused(501, "unsupported transfer coding")
    chunked = transfer_encoding
    if length is not None and length > max_body:
        raise _Refused(413, "request body too large")
    return method.decode("ascii"), target, headers, head_len, None if chunked else (length or 0), keep_alive, expect


def _http_chunked(buf: bytes, max_body: int, max_overhead: int) -> tuple[bytes, int]:
    """A chunked body at the start of ``buf``: ``(body, encoded length)``; raises like ``_http_head``."""
    body = bytearray()
    at = 0
    while True:
        if at - len(body) > max_overhead:
            raise _Refused(431, "chunked framing too large")
        nl = buf.find(b"\n", at)
        if nl < 0:
            if len(buf) - at > max_overhead:
                raise _Refused(431, "chunk line too long")
            raise _Partial
        end = nl - 1 if nl > at and buf[nl - 1] == 0x0D else nl
        line = buf[at:end]
        if b"\r" in line:
            raise _Refused(400, "invalid line ending in a chunked body")
        digits = 0
        while digits < len(line) and line[digits] in _HEX:
            digits += 1
        rest = line[digits:]
        ext_ok = not rest or (
            rest[0] in b"; \t" and rest.strip(b" \t")[:1] in (b"", b";") and all(b == 0x09 or (b >= 0x20 and b != 0x7F) for b in rest)
        )
        if digits == 0 or digits > 16 or not ext_ok:
            raise _Refused(400, "invalid chunk size line")
        size = int(line[:digits], 16)
        if size > max_body - len(body):
            raise _Refused(413, "request body too large")
        at = nl + 1
        if size == 0:
            try:
                _, end = _http_fields(buf, at)
            except _Partial:
                if len(buf) - at > max_overhead:
                    raise _Refused(431, "trailer section too large") from None
                raise
            return bytes(body), end
        if len(buf) < at + size + 1:
            raise _Partial
        body += buf[at : at + size]
        at += size
        tail = buf[at : at + 2]
        if tail[:1] == b"\n":
            at += 1
        elif tail == b"\r\n":
            at += 2
        elif tail == b"\r":
            raise _Partial
        else:
            raise _Refused(400, "chunk data not followed by a line end")


def parse_http(
    data: bytes, max_head: int = 65536, max_body: int = 4 * 1024 * 1024
) -> tuple[list[tuple[str, bytes, dict[bytes, bytes], bytes, bool]], int, int, int, str]:
    """Frame the complete HTTP/1.1 requests at the start of ``data`` (see ``docs/core-contract.md``).

    Returns ``(requests, consumed, status, need, reason)``: each request is ``(method, target,
    headers, body, keep_alive)`` with lower-case header names (repeats joined with ``", "``);
    ``status`` 0: the rest is an incomplete request (``need``: its whole length once known,
    else 0); 100: the same, and that request expects ``100 Continue``; else the HTTP status
    refusing the request at ``consumed``, with ``reason`` (answer it, then close).
    """
    if not isinstance(data, bytes):
        raise TypeError("parse_http needs bytes")
    requests: list[tuple[str, bytes, dict[bytes, bytes], bytes, bool]] = []
    at = 0
    while at < len(data):
        rest = data[at:] if at else data
        status = _HTTP_OK
        try:
            method, target, pairs, head_len, length, keep_alive, expect = _http_head(rest, max_head, max_body)
            status = _HTTP_CONTINUE if expect else _HTTP_OK
            if length is None:
                body, encoded = _http_chunked(rest[head_len:], max_body, max_head)
                total = head_len + encoded
            else:
                total = head_len + length
                if len(rest) < total:
                    return requests, at, status, total, ""
                body = rest[head_len:total]
        except _Partial:
            return requests, at, status, 0, ""
        except _Refused as refused:
            return requests, at, refused.status, 0, refused.reason
        headers: dict[bytes, bytes] = {}
        for name, value in pairs:
            known = headers.get(name)
            headers[name] = value if known is None else known + b", " + value
        requests.append((method, target, headers, body, keep_alive))
        at += total
    return requests, at, _HTTP_OK, 0, ""


# ----------------------------------------------------------------------------------------------
# Server-sent events
# ----------------------------------------------------------------------------------------------

_EOL_RE = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SseEvent:
    """One dispatched server-sent event."""

    __slots__ = ("_data", "_event", "_id", "_retry")

    def __init__(self, event: str, data: str, id: str, retry: int | None) -> None:
        self._event = event
        self._data = data
        self._id = id
        self._retry = retry

    @property
    def event(self) -> str:
        return self._event

    @property
    def data(self) -> str:
        return self._data

    @property
    def id(self) -> str:
        return self._id

    @property
    def retry(self) -> int | None:
        return self._retry

    def __repr__(self) -> str:
        return f"SseEvent(event={self._event!r}, data={self._data!r}, id={self._id!r}, retry={self._retry!r})"


def _event_type(etype: bytes) -> str:
    if not etype or etype == b"message":
        return "message"
    return etype.decode("utf-8", "replace")


def _split_lines(data: bytes) -> list[bytes]:
    if b"\r" in data:
        return _EOL_RE.split(data)
    return data.split(b"\n")


def _check_retry(ms: Any) -> int:
    if not isinstance(ms, int):
        raise TypeError(f"retry must be an int, not {type(ms).__name__}")
    if ms < 0 or ms >= 1 << 64:
        raise ValueError(f"retry must be a non-negative 64-bit number of milliseconds, not {ms}")
    return int(ms)


class SseEncoder:
    """Encodes server-sent events (``text/event-stream``)."""

    __slots__ = ()

    def encode(self, data: str | bytes, id: str | None = None, event: str | None = None, retry: int | None = None) -> bytes:
        parts: list[bytes] = []
        if id is not None:
            if not isinstance(id, str):
                raise TypeError(f"id must be a str, not {type(id).__name__}")
            if "\n" in id or "\r" in id or "\0" in id:
                raise ValueError("an event id must not contain CR, LF or NUL")
            parts.append(b"id: " + id.encode() + b"\n")
        if event is not None:
            if not isinstance(event, str):
                raise TypeError(f"event must be a str, not {type(event).__name__}")
            if "\n" in event or "\r" in event:
                raise ValueError("an event name must not contain CR or LF")
            parts.append(b"event: " + event.encode() + b"\n")
        if retry is not None:
            parts.append(b"retry: %d\n" % _check_retry(retry))
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if b"\n" in raw or b"\r" in raw:
            parts.append(b"data: " + b"\ndata: ".join(_split_lines(raw)) + b"\n\n")
        else:
            parts.append(b"data: " + raw + b"\n\n")
        return b"".join(parts)

    def encode_many(self, events: Sequence[tuple[str | bytes, str | None]]) -> bytes:
        encode = self.encode
        return b"".join([encode(data, id) for data, id in events])

    def comment(self, text: str = "") -> bytes:
        if not text:
            return b":\n\n"
        raw = text.encode() if isinstance(text, str) else bytes(text)
        if b"\n" not in raw and b"\r" not in raw:
            return b": " + raw + b"\n\n"
        return b"".join([b": " + line + b"\n" if line else b":\n" for line in _split_lines(raw)]) + b"\n"

    def retry(self, ms: int) -> bytes:
        return b"retry: %d\n\n" % _check_retry(ms)


class SseDecoder:
    """Incremental ``text/event-stream`` parser following the WHATWG rules (see ``_core.pyi``)."""

    __slots__ = (
        "_block_retry",
        "_cr_end",
        "_data",
        "_discard",
        "_last_id",
        "_max",
        "_pend_n",
        "_pending",
        "_retry",
        "_size",
        "_start",
        "_type",
    )

    def __init__(self, max_event_size: int = DEFAULT_MAX_EVENT) -> None:
        if max_event_size < 1:
            raise ValueError(f"max_event_size must be at least 1, not {max_event_size}")
        self._max = max_event_size
        self._last_id = ""
        self._retry: int | None = None
        self._start: bytes | None = b""  # bytes held while looking for the BOM; None once done
        self._cr_end = False  # the last chunk ended with CR: skip one LF at the next start
        self._pending = bytearray()  # the partial line (kept only outside discard mode)
        self._pend_n = 0  # its length in discard mode
        self._reset_block()

    def _reset_block(self) -> None:
        self._data: list[bytes] = []
        self._type = b""
        self._block_retry: int | None = None
        self._size = 0
        self._discard = False

    @property
    def last_event_id(self) -> str:
        return self._last_id

    @property
    def retry(self) -> int | None:
        return self._retry

    def feed(self, data: bytes | bytearray | memoryview) -> list[SseEvent | FrameTooLarge]:
        if type(data) is not bytes:
            data = bytes(data)
        out: list[SseEvent | FrameTooLarge] = []
        start = self._start
        if start is not None:
            data = start + data
            if len(data) < 3 and _BOM.startswith(data):
                self._start = data
                return out
            self._start = None
            if data[:3] == _BOM:
                data = data[3:]
        if not data:
            return out
        if self._cr_end:
            self._cr_end = False
            if data[0] == 0x0A:
                data = data[1:]
                if not data:
                    return out
        lines = _split_lines(data)
        tail = lines.pop()
        if not tail and data[-1] == 0x0D:
            self._cr_end = True
        if lines:
            if self._discard:
                if self._pend_n:
                    # The rest of a line of a dropped block: only counted.
                    self._size += len(lines[0])
                    self._pend_n = 0
                    del lines[0]
            elif self._pending:
                self._pending += lines[0]
                lines[0] = bytes(self._pending)
                self._pending = bytearray()
            if lines:
                if self._discard or self._size + len(data) + len(lines[0]) > self._max:
                    self._process(lines, out)
                else:
                    # No block can cross the limit within this chunk: skip the accounting.
                    self._process_fast(lines, out)
        if self._discard:
            self._pend_n += len(tail)
            self._size += len(tail)
        elif tail:
            if self._pending:
                self._pending += tail
            else:
                self._pending = bytearray(tail)
            n = len(self._pending)
            if self._size + n > self._max:
                # The partial line crosses the limit: the block is dropped; keep only a count.
                self._discard = True
                self._data = []
                self._type = b""
                self._pend_n = n
                self._size += n
                self._pending = bytearray()
        return out

    def _process_fast(self, lines: list[bytes], out: list[SseEvent | FrameTooLarge]) -> None:
        """``_process`` for chunks that cannot reach the size limit (the common case)."""
        data = self._data
        etype = self._type
        last_id = self._last_id
        block_retry = self._block_retry
        append = out.append
        event = SseEvent
        for line in lines:
            if not line:  # blank line: dispatch
                if data:
                    raw = data[0] if len(data) == 1 else b"\n".join(data)
                    name = "message" if not etype or etype == b"message" else etype.decode("utf-8", "replace")
                    append(event(name, raw.decode("utf-8", "replace"), last_id, block_retry))
                    data = []
                etype = b""
                block_retry = None
                continue
            c = line[0]
            if c == 0x64 and line.startswith(b"data: "):  # d
                data.append(line[6:])
                continue
            if c == 0x69 and line.startswith(b"id: "):  # i
                value = line[4:]
                if b"\0" not in value:
                    last_id = value.decode("utf-8", "replace")
                continue
            if c == 0x65 and line.startswith(b"event: "):  # e
                etype = line[7:]
                continue
            if c == 0x3A:  # a comment
                continue
            field, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"id":
                if b"\0" not in value:
                    last_id = value.decode("utf-8", "replace")
            elif field == b"event":
                etype = value
            elif field == b"retry" and 0 < len(value) <= 20 and value.isdigit():
                ms = int(value)
                if ms < 1 << 64:
                    self._retry = ms
                    block_retry = ms
        # The byte count of the block still open: its lines after the last blank line.
        i = len(lines) - 1
        while i >= 0 and lines[i]:
            i -= 1
        if i < 0:
            self._size += sum(map(len, lines))
        else:
            self._size = sum(map(len, lines[i + 1 :]))
        self._data = data
        self._type = etype
        self._last_id = last_id
        self._block_retry = block_retry

    def _process(self, lines: list[bytes], out: list[SseEvent | FrameTooLarge]) -> None:
        """Interpret complete lines (terminators removed). State lives in locals for speed."""
        limit = self._max
        size = self._size
        data = self._data
        discard = self._discard
        etype = self._type
        last_id = self._last_id
        block_retry = self._block_retry
        append = out.append
        for line in lines:
            if not line:  # blank line: dispatch
                if discard:
                    append(FrameTooLarge(size, limit))
                    discard = False
                elif data:
                    raw = data[0] if len(data) == 1 else b"\n".join(data)
                    append(
                        SseEvent(
                            _event_type(etype),
                            raw.decode("utf-8", "replace"),
                            last_id,
                            block_retry,
                        )
                    )
                    data = []
                etype = b""
                block_retry = None
                size = 0
                continue
            size += len(line)
            if discard:
                continue
            if size > limit:
                discard = True
                data = []
                etype = b""
                continue
            if line.startswith(b"data: "):
                data.append(line[6:])
                continue
            if line.startswith(b"id: "):
                value = line[4:]
                if b"\0" not in value:
                    last_id = value.decode("utf-8", "replace")
                continue
            if line.startswith(b"event: "):
                etype = line[7:]
                continue
            field, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"id":
                if b"\0" not in value:
                    last_id = value.decode("utf-8", "replace")
            elif field == b"event":
                etype = value
            elif field == b"retry" and 0 < len(value) <= 20 and value.isdigit():
                ms = int(value)
                if ms < 1 << 64:
                    self._retry = ms
                    block_retry = ms
            # empty field (a comment) and unknown fields are ignored
        self._size = size
        self._data = data
        self._discard = discard
        self._type = etype
        self._last_id = last_id
        self._block_retry = block_retry

    def close(self) -> list[SseEvent | FrameTooLarge]:
        out: list[SseEvent | FrameTooLarge] = []
        if self._discard:
            out.append(FrameTooLarge(self._size, self._max))
        self._pending = bytearray()
        self._pend_n = 0
        self._cr_end = False
        self._reset_block()
        return out


# -- a refused request, as a client reports it ---------------------------------------------------------
MAX_RETRY_AFTER_S = 300.0
_TOKEN_CHARS = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def refusal(status: int, www_authenticate: bytes | None, retry_after: bytes | None, now_unix: float) -> tuple[str, float | None]:
    """The failure reason for a refused request (``http 401 invalid_token``, ``http 429 rate
    limited (Retry-After 2 s)``) and the wait ``Retry-After`` asks for, in seconds (capped)."""
    wait = _retry_after_seconds(retry_after, now_unix) if retry_after is not None else None
    reason = f"http {status}"
    if status in (401, 403) and www_authenticate is not None:
        code = _bearer_error(www_authenticate)
        if code:
            reason += " " + code
    if status == 429:
        reason += " rate limited"
    if wait is not None:
        reason += f" (Retry-After {int(wait + 0.5)} s)"
    return reason, wait


def _bearer_error(value: bytes) -> str | None:
    code = auth_param(value, "error")
    return code if code and all(c in _TOKEN_CHARS for c in code.encode()) else None


def auth_param(www_authenticate: bytes, name: str) -> str | None:
    """The value of parameter ``name`` (matched without case) in a ``WWW-Authenticate`` value:
    ``name=token`` or ``name="quoted string"`` with backslash escapes undone; None when absent
    or unterminated. A name inside another parameter's quoted value is not a parameter."""
    value, key = www_authenticate, name.encode().lower()
    i, n, k = 0, len(value), len(key)
    while i < n:
        if (i == 0 or value[i - 1] in b" ,\t") and value[i : i + k].lower() == key:
            j = i + k
            while j < n and value[j] in b" \t":
                j += 1
            if j < n and value[j] == 0x3D:  # =
                j += 1
                while j < n and value[j] in b" \t":
                    j += 1
                out = bytearray()
                if j < n and value[j] == 0x22:
                    j += 1
                    while j < n and value[j] != 0x22:
                        if value[j] == 0x5C and j + 1 < n:
                            j += 1
                        out.append(value[j])
                        j += 1
                    if j >= n:
                        return None
                else:
                    while j < n and value[j] in _TOKEN_CHARS:
                        out.append(value[j])
                        j += 1
                try:
                    return out.decode()
                except UnicodeDecodeError:
                    return None
        if value[i] == 0x22:  # skip a quoted string
            i += 1
            while i < n and value[i] != 0x22:
                if value[i] == 0x5C:
                    i += 1
                i += 1
        i += 1
    return None


def _retry_after_seconds(value: bytes, now_unix: float) -> float | None:
    try:
        v = value.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if v.isdigit() and v.isascii():
        return min(float(v), MAX_RETRY_AFTER_S)
    at = _imf_fixdate(v)
    return None if at is None else min(max(at - now_unix, 0.0), MAX_RETRY_AFTER_S)


def _imf_fixdate(v: str) -> float | None:
    parts = v.split(" ")
    if len(parts) != 6 or parts[5] != "GMT" or not parts[0].endswith(",") or len(parts[1]) != 2 or len(parts[3]) != 4:
        return None
    _, day, month, year, clock, _ = parts
    hms = clock.split(":")
    if month not in _MONTHS or len(hms) != 3 or any(len(x) != 2 or not x.isdigit() for x in hms) or not (day.isdigit() and year.isdigit()):
        return None
    h, m, s = (int(x) for x in hms)
    if not 1 <= int(day) <= 31 or h > 23 or m > 59 or s > 60:
        return None
    days = calendar.timegm((int(year), _MONTHS.index(month) + 1, int(day), 0, 0, 0)) // 86400
    return float(days * 86400 + h * 3600 + m * 60 + s)
