"""Builders for content blocks and tool results (plain dicts, ready to serialise)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from mcpfast.server.types import JSONObject, JSONValue

__all__ = ["ToolResult", "audio", "embedded_resource", "image", "resource_link", "text", "text_result"]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, **extra: JSONValue) -> JSONObject:
    """A ``text`` content block."""
    return {"type": "text", "text": value, **extra}


def text_result(value: str) -> JSONObject:
    """The result of a tool without an output schema that returned the str ``value``: one text block."""
    return {"content": [{"type": "text", "text": value}]}


def image(data: bytes | str, mime_type: str, **extra: JSONValue) -> JSONObject:
    """An ``image`` block; bytes are base64-encoded, a str is taken as base64 already."""
    return {"type": "image", "data": _b64(data), "mimeType": mime_type, **extra}


def audio(data: bytes | str, mime_type: str, **extra: JSONValue) -> JSONObject:
    """An ``audio`` block (2025-03-26+); bytes are base64-encoded."""
    return {"type": "audio", "data": _b64(data), "mimeType": mime_type, **extra}


def embedded_resource(uri: str, *, text: str | None = None, blob: bytes | str | None = None, mime_type: str | None = None) -> JSONObject:
    """A ``resource`` block embedding text or binary contents."""
    contents: JSONObject = {"uri": uri}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    if blob is not None:
        contents["blob"] = _b64(blob)
    else:
        contents["text"] = text if text is not None else ""
    return {"type": "resource", "resource": contents}


def resource_link(uri: str, name: str, **extra: JSONValue) -> JSONObject:
    """A ``resource_link`` block (2025-06-18+)."""
    return {"type": "resource_link", "uri": uri, "name": name, **extra}


@dataclass
class ToolResult:
    """A tool result with full control over its fields.

    Attributes:
        content: the content blocks.
        structured: the ``structuredContent`` value, if any.
        is_error: whether the call failed (a tool-execution error the model can see).
        meta: ``_meta`` of the result.
    """

    content: list[JSONObject]
    structured: JSONValue = None
    is_error: bool = False
    meta: JSONObject | None = None
