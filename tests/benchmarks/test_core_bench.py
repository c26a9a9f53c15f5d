"""Benchmarks of the two core implementations on realistic MCP traffic.

Run (benchmarks are disabled by default in pyproject's addopts)::

    .venv/bin/python -m pytest tests/benchmarks/test_core_bench.py --benchmark-enable \
        --benchmark-json=bench_results/core.json
    .venv/bin/python -m mcpfast.bench.core_report bench_results/core.json bench_results

Every benchmark checks its result first, then sets ``benchmark.group`` (one group per scenario,
both implementations side by side) and ``benchmark.extra_info["impl"]``.
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import orjson
import pytest

from mcpfast.core import FrameTooLarge, load

# ---------------------------------------------------------------------------------- traffic

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
    words = ["model", "context", "protocol", "server", "tool", "résumé", "naïve", "日本語", "\"quoted\"", "tab\there"]
    rows = []
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


# -------------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["python", "rust"])
def impl(request: pytest.FixtureRequest, allow_no_rust: bool) -> tuple[str, ModuleType]:
    name = request.param
    try:
        return name, load(name)
    except ImportError as exc:
        if name == "rust" and allow_no_rust:
            pytest.skip("compiled core not importable (MCPFAST_ALLOW_NO_RUST=1)")
        pytest.fail(f"cannot load the {name} core: {exc}")


def setup(benchmark: Any, impl: tuple[str, ModuleType], group: str) -> ModuleType:
    benchmark.group = group
    benchmark.extra_info["impl"] = impl[0]
    return impl[1]


# ------------------------------------------------------------------------------ benchmarks


def test_decode_initialize(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "decode initialize")
    m = core.decode(INITIALIZE)
    assert (m.kind, m.id, m.method) == ("request", 0, "initialize")
    assert m.params["protocolVersion"] == "2025-11-25"
    benchmark(core.decode, INITIALIZE)


def _handle(core: ModuleType, data: bytes) -> bytes:
    """What a server does per tools/call: decode, route, read the tool name, encode the result."""
    m = core.decode(data)
    mid = m.id
    assert m.method == "tools/call"
    m.params["name"]  # noqa: B018 - a handler reads it
    return core.encode_result(mid, SMALL_RESULT)


def test_tools_call_small(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "tools/call small: decode + encode_result")
    out = _handle(core, CALL_SMALL)
    assert orjson.loads(out) == {"jsonrpc": "2.0", "id": 7, "result": SMALL_RESULT}
    assert core.decode(CALL_SMALL).params["name"] == "get_weather"
    benchmark(_handle, core, CALL_SMALL)


def test_tools_call_64k(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "tools/call 64KB: decode + encode_result")
    assert len(CALL_64K) >= 64 * 1024
    out = _handle(core, CALL_64K)
    assert orjson.loads(out) == {"jsonrpc": "2.0", "id": 12, "result": SMALL_RESULT}
    assert core.decode(CALL_64K).params == orjson.loads(CALL_64K)["params"]
    benchmark(_handle, core, CALL_64K)


def test_encode_tools_list(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "encode tools/list 100")
    out = core.encode_result(1, TOOLS_LIST)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + orjson.dumps(TOOLS_LIST) + b"}"
    benchmark(core.encode_result, 1, TOOLS_LIST)


def test_progress_notification(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "progress notification encode")
    out = core.encode_notification("notifications/progress", PROGRESS_PARAMS)
    assert out == b'{"jsonrpc":"2.0","method":"notifications/progress","params":' + orjson.dumps(PROGRESS_PARAMS) + b"}"
    benchmark(core.encode_notification, "notifications/progress", PROGRESS_PARAMS)


def _sse_decode(core: ModuleType) -> list[Any]:
    dec = core.SseDecoder()
    out: list[Any] = []
    for chunk in SSE_CHUNKS:
        out += dec.feed(chunk)
    return out


def test_sse_decode(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "sse decode 1000")
    events = _sse_decode(core)
    assert len(events) == 1000
    assert not any(isinstance(e, FrameTooLarge) for e in events)
    assert (events[0].event, events[0].id) == ("message", "evt-0")
    assert orjson.loads(events[999].data)["id"] == 999
    benchmark(_sse_decode, core)


def test_scan_reply(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "scan_reply")
    assert core.scan_reply(REPLY) == (41, False, None)
    benchmark(core.scan_reply, REPLY)


def _frame(core: ModuleType) -> list[Any]:
    framer = core.LineFramer()
    out: list[Any] = []
    for chunk in STDIO_CHUNKS:
        out += framer.feed(chunk)
    return out


def test_line_framing(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "line framing 1000 msgs")
    lines = _frame(core)
    assert len(lines) == 1000
    assert orjson.loads(lines[-1])["id"] == 999
    benchmark(_frame, core)
