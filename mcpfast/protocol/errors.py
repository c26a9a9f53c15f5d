"""JSON-RPC and MCP error codes, one name each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from mcpfast.protocol.versions import V2026_07_28, supports

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "McpError",
    "meta_required",
    "resource_not_found_code",
    "unsupported_version",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

RESOURCE_NOT_FOUND: Final = -32002
"""``resources/read`` of an unknown URI up to 2025-11-25 (retired in 2026-07-28)."""
URL_ELICITATION_REQUIRED: Final = -32042
"""2025-11-25: the request needs a URL-mode elicitation first (retired in 2026-07-28)."""
HEADER_MISMATCH: Final = -32020
"""2026-07-28: an HTTP header disagrees with the body."""
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
"""2026-07-28: the request needs a client capability it did not declare."""
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""2026-07-28: the request's protocol version is unknown or not served."""
REQUEST_CANCELLED: Final = -32800
"""Not sent on the wire by a server; the code a local waiter sees when its request was cancelled."""


def resource_not_found_code(version: str) -> int:
    """The code for an unknown resource URI: -32002 before 2026-07-28, -32602 from it."""
    return INVALID_PARAMS if supports(version, V2026_07_28) else RESOURCE_NOT_FOUND


class McpError(Exception):
    """An error a handler raises to answer its request with a JSON-RPC error.

    Attributes:
        code: the JSON-RPC error code.
        message: a short description.
        data: optional structured detail, sent as ``error.data``.
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def unsupported_version(supported: Iterable[str], requested: object) -> McpError:
    """-32022 for a 2026 request whose version is unknown or not served (``data`` lists ours)."""
    data = {"supported": list(supported), "requested": requested if isinstance(requested, str) else ""}
    return McpError(UNSUPPORTED_PROTOCOL_VERSION, "unsupported protocol version", data)


def meta_required(key: str) -> McpError:
    """-32602 for a 2026 request without a required ``params._meta`` key."""
    return McpError(INVALID_PARAMS, f"params._meta[{key!r}] is required")
