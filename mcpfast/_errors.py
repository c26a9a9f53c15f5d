"""Exceptions shared by both implementations of the core.

The Rust extension imports these classes and raises them, so code that catches
``mcpfast.core.JsonRpcError`` works the same whichever implementation is loaded.

Tree::

    ValueError
    ├── JsonRpcError      a message that is not valid JSON-RPC 2.0 (carries the reply code)
    └── FrameTooLarge     a line or SSE event over the configured size limit
"""

from __future__ import annotations

from typing import Any

from mcpfast.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "FrameTooLarge",
    "JsonRpcError",
]


class JsonRpcError(ValueError):
    """A JSON-RPC error: the code and message to put in the error reply.

    Attributes:
        code: the JSON-RPC error code (-32700 parse error, -32600 invalid request, ...).
        message: a human-readable explanation.
        id: the request id when it could be read from the bad message, else ``None``.
        data: optional extra data for the error reply.
    """

    def __init__(self, code: int, message: str, id: int | str | None = None, data: Any = None) -> None:
        super().__init__(code, message, id)
        self.code = code
        self.message = message
        self.id = id
        self.data = data

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return f"JsonRpcError(code={self.code}, message={self.message!r}, id={self.id!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JsonRpcError):
            return NotImplemented
        return (self.code, self.id) == (other.code, other.id)

    def __hash__(self) -> int:
        return hash((self.code, self.id))


class FrameTooLarge(ValueError):
    """A stdio line or SSE event exceeded the size limit and was dropped.

    The framer or decoder has resynchronised at the next boundary; the stream goes on.

    Attributes:
        size: how many bytes of the oversized frame were seen (at least ``limit + 1``).
        limit: the configured limit in bytes.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(size, limit)
        self.size = size
        self.limit = limit

    def __str__(self) -> str:
        return f"frame of at least {self.size} bytes exceeds the limit of {self.limit} bytes"

    def __repr__(self) -> str:
        return f"FrameTooLarge(size={self.size}, limit={self.limit})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameTooLarge):
            return NotImplemented
        return (self.size, self.limit) == (other.size, other.limit)

    def __hash__(self) -> int:
        return hash((self.size, self.limit))
