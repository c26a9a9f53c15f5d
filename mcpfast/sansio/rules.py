"""Small protocol rules shared by every server: pagination, completion, logging, tool errors.

Each rule lives here once; the server layer and transports call these instead of re-deciding.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, Final, TypeVar

from mcpfast.protocol.errors import INVALID_PARAMS, McpError
from mcpfast.protocol.methods import LOG_LEVELS
from mcpfast.protocol.versions import V2025_11_25, supports

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_COMPLETION_VALUES",
    "completion_result",
    "decode_cursor",
    "encode_cursor",
    "input_errors_are_tool_errors",
    "log_level_rank",
    "paginate",
]

T = TypeVar("T")

DEFAULT_PAGE_SIZE: Final = 50
"""Items per page of the paginated list methods (the server's choice, per the spec)."""
MAX_COMPLETION_VALUES: Final = 100
"""``completion/complete`` returns at most this many values."""

_CURSOR_PREFIX: Final = b"mcpfast:"
_LEVEL_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def encode_cursor(offset: int) -> str:
    """An opaque cursor for the item at ``offset``."""
    return base64.urlsafe_b64encode(_CURSOR_PREFIX + str(offset).encode()).decode("ascii")


def decode_cursor(cursor: object) -> int:
    """The offset a cursor of ours stands for.

    Raises:
        McpError: -32602 when the cursor is not one this server issued.
    """
    if not isinstance(cursor, str):
        raise McpError(INVALID_PARAMS, "invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise McpError(INVALID_PARAMS, "invalid cursor") from None
    digits = raw[len(_CURSOR_PREFIX) :]
    if not raw.startswith(_CURSOR_PREFIX) or not digits.isdigit():
        raise McpError(INVALID_PARAMS, "invalid cursor")
    return int(digits)


def paginate(items: Sequence[T], cursor: object, page_size: int = DEFAULT_PAGE_SIZE) -> tuple[Sequence[T], str | None]:
    """One page of ``items`` and the cursor of the next page (``None`` at the end).

    Args:
        items: the whole list, in a stable order.
        cursor: ``params.cursor`` as sent (``None`` for the first page).
        page_size: items per page.

    Raises:
        McpError: -32602 for a cursor this server did not issue or that points past the end.
    """
    start = 0 if cursor is None else decode_cursor(cursor)
    if start > len(items) or (cursor is not None and start == len(items) and start != 0):
        raise McpError(INVALID_PARAMS, "invalid cursor")
    end = start + page_size
    return items[start:end], (encode_cursor(end) if end < len(items) else None)


def completion_result(values: Sequence[str], total: int | None = None, has_more: bool | None = None) -> dict[str, Any]:
    """The ``completion/complete`` result, capped at 100 values (``hasMore`` set when cut)."""
    values = list(values)
    completion: dict[str, Any] = {"values": values[:MAX_COMPLETION_VALUES]}
    if len(values) > MAX_COMPLETION_VALUES:
        completion["total"] = total if total is not None else len(values)
        completion["hasMore"] = True
    else:
        if total is not None:
            completion["total"] = total
        if has_more is not None:
            completion["hasMore"] = has_more
    return {"completion": completion}


def log_level_rank(level: object) -> int:
    """Severity rank of an RFC 5424 level name (debug = 0).

    Raises:
        McpError: -32602 for an unknown level.
    """
    rank = _LEVEL_RANK.get(level) if isinstance(level, str) else None
    if rank is None:
        raise McpError(INVALID_PARAMS, f"invalid log level {level!r}", {"levels": list(LOG_LEVELS)})
    return rank


def input_errors_are_tool_errors(version: str) -> bool:
    """From 2025-11-25 bad tool arguments are an ``isError`` result; before, a -32602 error."""
    return supports(version, V2025_11_25)
