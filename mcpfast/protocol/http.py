"""The Streamable HTTP wire rules, sans-IO, shared by the client and the server transport.

One table of what travels in headers and one codec for it: the client (``mcpfast.client``)
builds its headers here and the server (``mcpfast.transports.http``) checks them here, so the
two cannot drift. Nothing in this module does I/O.

* Header names (as sent, and lower-case bytes as a server reads them).
* ``MCP-Protocol-Version``: sent after a handshake from 2025-06-18 on, and on every 2026 POST.
* 2026-07-28 (SEP-2243): ``Mcp-Method`` on every request; ``Mcp-Name`` for the methods in
  ``NAMED_METHODS`` (``tools/call`` and ``prompts/get`` from ``params.name``, ``resources/read``
  from ``params.uri``); ``Mcp-Param-<Name>`` for every ``x-mcp-header`` argument. Values that
  cannot travel bare use the ``=?base64?...?=`` form. ``resources/subscribe`` and
  ``resources/unsubscribe`` carry no ``Mcp-Name``: they do not exist in 2026-07-28 (replaced by
  ``subscriptions/listen``) and the handshake era has no name headers.
* The HTTP status of a 2026 JSON-RPC error, and the Accept / Content-Type / Origin checks.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcpfast.protocol.host import LOOPBACK_HOSTS
from mcpfast.protocol.versions import V2025_06_18, supports

__all__ = [
    "ACCEPT_BOTH",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_HEAD",
    "JSON",
    "LOCAL_HOSTS",
    "MCP_METHOD",
    "MCP_NAME",
    "MCP_PARAM",
    "MCP_PROTOCOL_VERSION",
    "MCP_SESSION_ID",
    "NAMED_METHODS",
    "SSE",
    "accepts",
    "check_param_headers",
    "check_request_headers",
    "decode_header_value",
    "encode_header_value",
    "is_json",
    "name_of",
    "origin_allowed",
    "param_annotations",
    "refusal",
    "sends_version_header",
    "stateless_request_headers",
    "status_for_error",
    "too_large",
    "too_large_message",
]

MCP_SESSION_ID: Final = "Mcp-Session-Id"
MCP_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
MCP_METHOD: Final = "Mcp-Method"
MCP_NAME: Final = "Mcp-Name"
MCP_PARAM: Final = "Mcp-Param-"
"""Prefix of the SEP-2243 argument headers (``Mcp-Param-Region``)."""

JSON: Final = "application/json"
SSE: Final = "text/event-stream"
ACCEPT_BOTH: Final = f"{JSON}, {SSE}"
"""What a client's POST accepts: a request is answered with either."""

NAMED_METHODS: Final[Mapping[str, str]] = {
    m.TOOLS_CALL: "name", m.PROMPTS_GET: "name", m.RESOURCES_READ: "uri",
    m.TASKS_GET: "taskId", m.TASKS_UPDATE: "taskId", m.TASKS_CANCEL: "taskId",
}  # fmt: skip
"""Methods whose ``Mcp-Name`` header (2026-07-28) carries one param, and which param."""

DEFAULT_MAX_BODY: Final = 4 * 1024 * 1024
"""The largest request body a server reads, in bytes (413 above), whichever runner serves it."""

DEFAULT_MAX_HEAD: Final = 64 * 1024
"""Request line + header fields, in bytes (414/431 above, judged while the head arrives)."""

LOCAL_HOSTS: Final = frozenset({*LOOPBACK_HOSTS, "::1"})
"""Origins whose host is one of these are always allowed (DNS-rebinding protection)."""

_STATUS: Final[Mapping[int, int]] = {
    METHOD_NOT_FOUND: 404,
    INVALID_REQUEST: 400,
    PARSE_ERROR: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}

_BASE64_OPEN: Final = "=?base64?"
_BASE64_CLOSE: Final = "?="


def status_for_error(code: int | None) -> int:
    """The HTTP status of a 2026-07-28 JSON-RPC error reply (200 for codes the table leaves alone)."""
    return _STATUS.get(code, 200) if code is not None else 200


def refusal(message: str, code: int = INVALID_REQUEST, rid: int | str | None = None, data: Any = None) -> bytes:
    """The body of every refusal a server answers with itself: a JSON-RPC error (``application/json``)."""
    return core.encode_error(rid, code, message, data)


def too_large_message(limit: int) -> str:
    """What a 413 says, from every runner."""
    return f"request body exceeds {limit} bytes"


def too_large(limit: int) -> tuple[int, bytes]:
    """``(413, body)`` for a request body over ``limit`` bytes: the same answer from every runner."""
    return 413, refusal(too_large_message(limit))


def sends_version_header(version: str | None) -> bool:
    """Whether a handshake-era client sends ``MCP-Protocol-Version`` (from 2025-06-18 on)."""
    return version is not None and supports(version, V2025_06_18)


# ------------------------------------------------------------------ header value codec


def encode_header_value(value: str) -> str:
    """A header-safe value as it is, anything else in the ``=?base64?...?=`` form."""
    safe = (
        value != ""
        and value == value.strip(" \t")
        and all(0x20 <= ord(c) <= 0x7E for c in value)
        and not (value.startswith(_BASE64_OPEN) and value.endswith(_BASE64_CLOSE))
    )
    if safe:
        return value
    return _BASE64_OPEN + base64.b64encode(value.encode("utf-8")).decode("ascii") + _BASE64_CLOSE


_DECODED: dict[bytes, str | None] = {}
"""Received header values already decoded: a client repeats a handful (``Mcp-Method``, ``Mcp-Name``)."""


def decode_header_value(raw: bytes | str) -> str | None:
    """A received header value, the base64 form decoded (``None``: not a valid value)."""
    if type(raw) is bytes:
        try:
            return _DECODED[raw]
        except KeyError:
            value = _decode_header_value(raw)
            if len(_DECODED) < 1024:  # bounded: values a client makes up are decoded each time
                _DECODED[raw] = value
            return value
    return _decode_header_value(raw)


def _decode_header_value(raw: bytes | str) -> str | None:
    try:
        text = (raw.decode("ascii") if isinstance(raw, bytes | bytearray) else raw).strip(" \t")
    except UnicodeDecodeError:
        return None
    if text.startswith(_BASE64_OPEN) and text.endswith(_BASE64_CLOSE):
        try:
            return base64.b64decode(text[len(_BASE64_OPEN) : -len(_BASE64_CLOSE)], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    if not (text.isascii() and text.isprintable()):  # visible ASCII and spaces only (0x20-0x7E)
        return None
    return text


# ------------------------------------------------------------------ 2026 request headers


def name_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The value ``Mcp-Name`` carries for this request (``None``: the method has none)."""
    field = NAMED_METHODS.get(method)
    if field is None or not params:
        return None
    value = params.get(field)
    return value if isinstance(value, str) else None


def stateless_request_headers(version: str, method: str | None, name: str | None) -> dict[str, str]:
    """The headers a client sends with a 2026-07-28 request (``name``: see ``name_of``)."""
    headers = {MCP_PROTOCOL_VERSION: version}
    if method:
        headers[MCP_METHOD] = method
    if name is not None:
        headers[MCP_NAME] = encode_header_value(name)
    return headers


def check_request_headers(headers: Mapping[bytes, bytes], method: str, param: Any, body_version: Any) -> str | None:
    """The server's check of a 2026 request's headers against its body; what is wrong, or ``None``.

    Args:
        headers: lower-case header names, repeated values joined.
        method: the body's method.
        param: ``param(field)`` of the body (how the name-carrying param is read).
        body_version: ``params._meta`` protocol version of the body.

    A failure is answered 400 with -32020 (``HEADER_MISMATCH``).
    """
    raw = headers.get(b"mcp-protocol-version")
    if raw is None:
        return f"missing {MCP_PROTOCOL_VERSION} header"
    if isinstance(body_version, str) and raw.decode("latin-1").strip() != body_version:
        return f"{MCP_PROTOCOL_VERSION} header does not match params._meta protocolVersion"
    raw_method = headers.get(b"mcp-method")
    if raw_method is None:
        return f"missing {MCP_METHOD} header"
    if decode_header_value(raw_method) != method:
        return f"{MCP_METHOD} header does not match the body's method"
    field = NAMED_METHODS.get(method)
    if field is not None:
        raw_name = headers.get(b"mcp-name")
        if raw_name is None:
            return f"missing {MCP_NAME} header"
        value = param(field)
        if not isinstance(value, str) or decode_header_value(raw_name) != value:
            return f"{MCP_NAME} header does not match params.{field}"
    return None


def param_annotations(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[bytes, tuple[str, ...]]]:
    """``(lower-case header name, argument path)`` for every ``x-mcp-header`` reachable through ``properties``."""
    found: list[tuple[bytes, tuple[str, ...]]] = []
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return found
    for key, sub in props.items():
        if not isinstance(sub, dict):
            continue
        name = sub.get("x-mcp-header")
        if isinstance(name, str) and name:
            found.append(((MCP_PARAM + name).lower().encode("ascii", "replace"), (*path, key)))
        found.extend(param_annotations(sub, (*path, key)))
    return found


def check_param_headers(annotations: Iterable[tuple[bytes, tuple[str, ...]]], arguments: Any, headers: Mapping[bytes, bytes]) -> str | None:
    """SEP-2243 ``Mcp-Param-*``: each annotated argument must match its header (else -32020)."""
    for header, path in annotations:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        raw = headers.get(header)
        if value is None:
            if raw is not None:
                return f"{header.decode()} header sent for an absent argument"
            continue
        if raw is None:
            return f"missing {header.decode()} header"
        text = decode_header_value(raw)
        if isinstance(value, bool):
            ok = text == ("true" if value else "false")
        elif isinstance(value, int):
            try:
                ok = text is not None and int(text) == value
            except ValueError:
                ok = False
        else:
            ok = isinstance(value, str) and text == value
        if not ok:
            return f"{header.decode()} header does not match the argument"
    return None


# ------------------------------------------------------------------ content negotiation


_ACCEPT_CACHE: dict[tuple[bytes, bool, bool], bool] = {}


def accepts(accept: bytes | None, json: bool, sse: bool) -> bool:
    """Whether an ``Accept`` value lists JSON (when ``json``) and SSE (when ``sse``)."""
    if accept is None:
        return False
    key = (accept, json, sse)
    known = _ACCEPT_CACHE.get(key)
    if known is None:
        known = _parse_accept(accept, json, sse)
        if len(_ACCEPT_CACHE) < 256:  # clients send a handful of distinct values
            _ACCEPT_CACHE[key] = known
    return known


def _parse_accept(accept: bytes, json: bool, sse: bool) -> bool:
    has_json = has_sse = False
    for part in accept.split(b","):
        media = part.split(b";", 1)[0].strip().lower()
        if media == b"*/*":
            return True
        if media in (b"application/json", b"application/*"):
            has_json = True
        elif media in (b"text/event-stream", b"text/*"):
            has_sse = True
    return (has_json or not json) and (has_sse or not sse)


def is_json(content_type: bytes | str | None) -> bool:
    """Whether a ``Content-Type`` value is ``application/json`` (parameters ignored)."""
    if content_type is None:
        return False
    if isinstance(content_type, str):
        content_type = content_type.encode("latin-1")
    return content_type == b"application/json" or content_type.split(b";", 1)[0].strip().lower() == b"application/json"


def origin_allowed(origin: bytes, allowed: frozenset[str], any_origin: bool = False) -> bool:
    """The Origin check: a listed origin (``scheme://host[:port]``, lower case) or a local host."""
    if any_origin:
        return True
    try:
        text = origin.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return False
    if text.rstrip("/") in allowed:
        return True
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return False
    return host is not None and (host in LOCAL_HOSTS or f"[{host}]" in LOCAL_HOSTS)
