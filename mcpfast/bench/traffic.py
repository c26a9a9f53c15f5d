"""Realistic MCP traffic for the core benchmarks and ``make demo``: the same bytes and objects
a server and a client handle (an initialize request, tools/call with small and 64 KB arguments,
a 100-tool tools/list reply, progress notifications, an SSE stream of 1,000 events, 1,000 stdio
lines)."""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import orjson

from mcpfast.core import load

__all__ = [
    "CALL_64K",
    "CALL_SMALL",
    "INITIALIZE",
    "PROGRESS_PARAMS",
    "REPLY",
    "SMALL_RESULT",
    "SSE_CHUNKS",
    "STDIO_CHUNKS",
    "TOOLS_LIST",
    "handle_eager",
    "handle_lazy",
    "route",
]

# What the TypeScript SDK client (protocol 2025-11-25) writes: JSON.stringify of
# {...request, jsonrpc: "2.0", id}, so "method" and "params" come first; ids count from 0.
INITIALIZE = orjson.dumps(
    {
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "roots": {"listChanged": True},
                "sampling": {},
                "elicitation": {"form": {}, "url": {}},
            },
            "clientInfo": {"name": "mcp-inspector", "version": "0.17.2"},
        },
        "jsonrpc": "2.0",
        "id": 0,
    }
)

CALL_SMALL = orjson.dumps(
    {
        "method": "tools/call",
        "params": {
            "name": "get_weather",
            "arguments": {"city": "Zürich", "units": "metric", "days": 3},
            "_meta": {"progressToken": 7},
        },
        "jsonrpc": "2.0",
        "id": 7,
    }
)


def _big_arguments(size: int) -> dict[str, Any]:
    rnd = random.Random(64)
    words = ["model", "context", "protocol", "server", "tool", "résumé", "naïve", "日本語", '"quoted"', "tab\there"]
    rows: list[dict[str, Any]] = []
    text_parts: list[str] = []
    while sum(len(p) for p in text_parts) < size // 2:
        text_parts.append(" ".join(rnd.choice(words) for _ in range(12)) + ".\n")
    n = 0
    while len(orjson.dumps(rows)) < size // 2:
        rows.append({"id": n, "name": f"row-{n}", "score": rnd.random() * 100, "tags": ["a", "b"], "ok": n % 3 == 0})
        n += 1
    return {"document": "".join(text_parts), "rows": rows, "language": "en"}


CALL_64K = orjson.dumps(
    {
        "method": "tools/call",
        "params": {"name": "summarize_document", "arguments": _big_arguments(64 * 1024)},
        "jsonrpc": "2.0",
        "id": 12,
    }
)

SMALL_RESULT = {"content": [{"type": "text", "text": "Sunny, 21°C"}], "isError": False}


def _tools(n: int) -> dict[str, Any]:
    verbs = ["get", "list", "create", "update", "delete", "search", "summarize", "export"]
    nouns = ["issue", "repository", "file", "user", "invoice", "calendar_event", "ticket", "document"]
    tools = []
    for i in range(n):
        verb, noun = verbs[i % len(verbs)], nouns[(i // len(verbs)) % len(nouns)]
        tools.append(
            {
                "name": f"{verb}_{noun}_{i}",
                "title": f"{verb.capitalize()} {noun.replace('_', ' ')}",
                "description": (
                    f"{verb.capitalize()} a {noun.replace('_', ' ')} in the connected workspace. "
                    "Returns a JSON object describing the outcome; fails with a clear message when "
                    "the caller lacks permission or the item does not exist."
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": f"The {noun} identifier"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                        "fields": {"type": "array", "items": {"type": "string"}},
                        "dryRun": {"type": "boolean", "default": False},
                    },
                    "required": ["id"],
                    "additionalProperties": False,
                },
                "annotations": {"readOnlyHint": verb in ("get", "list", "search"), "idempotentHint": True},
            }
        )
    return {"tools": tools, "nextCursor": "eyJwYWdlIjoyfQ=="}


TOOLS_LIST = _tools(100)

PROGRESS_PARAMS = {"progressToken": "c2b1e0f4-progress", "progress": 50, "total": 100, "message": "Processing item 50 of 100"}

REPLY = orjson.dumps(
    {
        "result": {
            "content": [{"type": "text", "text": "Line of tool output, with some detail. " * 40}],
            "structuredContent": {"status": "ok", "items": list(range(50))},
            "isError": False,
        },
        "jsonrpc": "2.0",
        "id": 41,
    }
)


def _sse_stream(n: int) -> bytes:
    py = load("python")
    enc = py.SseEncoder()
    parts = []
    for i in range(n):
        if i % 4 == 3:
            msg = py.encode_result(i, {"content": [{"type": "text", "text": f"result {i}"}], "isError": False})
        else:
            msg = py.encode_notification("notifications/progress", dict(PROGRESS_PARAMS, progress=i))
        parts.append(enc.encode(msg, id=f"evt-{i}", event="message"))
    return b"".join(parts)


SSE_STREAM = _sse_stream(1000)
SSE_CHUNK = 16 * 1024

STDIO_STREAM = load("python").frame_lines(
    [orjson.dumps({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": f"ok {i}"}]}}) for i in range(1000)]
)
STDIO_CHUNK = 64 * 1024


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


SSE_CHUNKS = chunks(SSE_STREAM, SSE_CHUNK)
STDIO_CHUNKS = chunks(STDIO_STREAM, STDIO_CHUNK)


# What a server does per call: plain functions in the package (not in a test module, whose asserts
# pytest rewrites into slower code), the same Python around both implementations, as a router would.
def _tools_call(core: ModuleType, data: bytes) -> Any:
    m = core.decode(data)
    if m.kind != "request" or m.method != "tools/call":
        raise ValueError(f"not a tools/call request: {m!r}")
    return m


def route(core: ModuleType, data: bytes) -> bytes:
    """Decode plus reply encode: what the transport and router do for every tools/call (kind,
    id and method read, the reply encoded with the id spliced back)."""
    m = _tools_call(core, data)
    return core.encode_result(m.id, SMALL_RESULT)


def handle_lazy(core: ModuleType, data: bytes) -> bytes:
    """The server's path: route on params.name and hand params.arguments to the tool, parsing
    only those two members (``Message.param``)."""
    m = _tools_call(core, data)
    m.param("name")
    m.param("arguments")
    return core.encode_result(m.id, SMALL_RESULT)


def handle_eager(core: ModuleType, data: bytes) -> bytes:
    """As a handler that asks for the whole params dict."""
    m = _tools_call(core, data)
    m.params["name"]  # a handler reads it
    return core.encode_result(m.id, SMALL_RESULT)
