"""Benchmarks of the two core implementations on realistic MCP traffic.

Run with ``make bench-core`` (benchmarks are disabled by default in pyproject's addopts, so
``make test`` runs each once as a correctness test). The traffic lives in
``mcpfast.bench.traffic``.

Every benchmark checks its result first, then sets ``benchmark.group`` (one group per scenario,
both implementations side by side) and ``benchmark.extra_info["impl"]``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import orjson
import pytest

from mcpfast.bench.traffic import (
    CALL_64K,
    CALL_SMALL,
    INITIALIZE,
    PROGRESS_PARAMS,
    REPLY,
    SMALL_RESULT,
    SSE_CHUNKS,
    STDIO_CHUNKS,
    TOOLS_LIST,
    handle_eager,
    handle_lazy,
    route,
)
from mcpfast.core import FrameTooLarge, load

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


# Sub-microsecond operations run INNER times per timed call, so that pytest-benchmark's own
# per-call overhead (the same for both implementations, and not part of the operation) does not
# dilute the ratio; the report divides by extra_info["ops"].
INNER = 100


def _many(fn: Any, *args: Any) -> Any:
    def run() -> None:
        for _ in range(INNER):
            fn(*args)

    return run


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
    benchmark.extra_info["ops"] = INNER
    benchmark(_many(core.decode, INITIALIZE))


HANDLERS = {"decode + encode_result": route, "+ param(name, arguments)": handle_lazy, "+ params dict": handle_eager}


@pytest.mark.parametrize("style", list(HANDLERS))
def test_tools_call_small(benchmark: Any, impl: tuple[str, ModuleType], style: str) -> None:
    core = setup(benchmark, impl, f"tools/call small: {style}")
    out = HANDLERS[style](core, CALL_SMALL)
    assert orjson.loads(out) == {"jsonrpc": "2.0", "id": 7, "result": SMALL_RESULT}
    m = core.decode(CALL_SMALL)
    assert m.param("name") == m.params["name"] == "get_weather"
    benchmark.extra_info["ops"] = INNER
    benchmark(_many(HANDLERS[style], core, CALL_SMALL))


@pytest.mark.parametrize("style", list(HANDLERS))
def test_tools_call_64k(benchmark: Any, impl: tuple[str, ModuleType], style: str) -> None:
    core = setup(benchmark, impl, f"tools/call 64KB: {style}")
    assert len(CALL_64K) >= 64 * 1024
    out = HANDLERS[style](core, CALL_64K)
    assert orjson.loads(out) == {"jsonrpc": "2.0", "id": 12, "result": SMALL_RESULT}
    m = core.decode(CALL_64K)
    assert m.param("arguments") == m.params["arguments"] == orjson.loads(CALL_64K)["params"]["arguments"]
    benchmark(HANDLERS[style], core, CALL_64K)


def test_encode_tools_list(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "encode tools/list 100")
    out = core.encode_result(1, TOOLS_LIST)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + orjson.dumps(TOOLS_LIST) + b"}"
    benchmark(core.encode_result, 1, TOOLS_LIST)


def test_progress_notification(benchmark: Any, impl: tuple[str, ModuleType]) -> None:
    core = setup(benchmark, impl, "progress notification encode")
    out = core.encode_notification("notifications/progress", PROGRESS_PARAMS)
    assert out == b'{"jsonrpc":"2.0","method":"notifications/progress","params":' + orjson.dumps(PROGRESS_PARAMS) + b"}"
    benchmark.extra_info["ops"] = INNER
    benchmark(_many(core.encode_notification, "notifications/progress", PROGRESS_PARAMS))


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
    benchmark.extra_info["ops"] = INNER
    benchmark(_many(core.scan_reply, REPLY))


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
