"""The check (mypy, in ``make lint``; never run) that no ``Any`` flows out of ``mcpfast.core``.

``mcpfast.core`` binds its names from whichever implementation loads, a module that mypy alone
reads as ``Any``; it gives them the types of ``mcpfast/_core.pyi`` instead. Every public name of
``mcpfast.core`` is used below (``test_core_doorway.py`` checks that none is left out) under
``assert_type``, which fails on ``Any``: a constant or a class against the type the stub (or the
core's own definition) gives it, a function by the type of a call (an ``Any`` function, or one
typed ``Callable[..., Any]``, returns ``Any``).
"""

from types import ModuleType
from typing import Literal, assert_type

from mcpfast import _core, core


def constants() -> None:
    assert_type(core.DEFAULT_MAX_DEPTH, int)
    assert_type(core.DEFAULT_MAX_EVENT, int)
    assert_type(core.DEFAULT_MAX_LINE, int)
    assert_type(core.HAS_LANE, bool)
    assert_type(core.HAS_NATIVE_ENGINE, bool)
    assert_type(core.IMPLEMENTATION, str)
    assert_type(core.INTERNAL_ERROR, Literal[-32603])
    assert_type(core.INVALID_PARAMS, Literal[-32602])
    assert_type(core.INVALID_REQUEST, Literal[-32600])
    assert_type(core.METHOD_NOT_FOUND, Literal[-32601])
    assert_type(core.PARSE_ERROR, Literal[-32700])


def classes() -> None:
    assert_type(core.DrainRow, type[_core.DrainRow])
    assert_type(core.EngineConfig, type[_core.EngineConfig])
    assert_type(core.FrameTooLarge, type[_core.FrameTooLarge])
    assert_type(core.HttpLane, type[_core.HttpLane])
    assert_type(core.JsonRpcError, type[_core.JsonRpcError])
    assert_type(core.LineFramer, type[_core.LineFramer])
    assert_type(core.Message, type[_core.Message])
    assert_type(core.MixItem, type[_core.MixItem])
    assert_type(core.NativeEngine, type[_core.NativeEngine])
    assert_type(core.SseDecoder, type[_core.SseDecoder])
    assert_type(core.SseEncoder, type[_core.SseEncoder])
    assert_type(core.SseEvent, type[_core.SseEvent])
    assert_type(core.StdioLane, type[_core.StdioLane])


def functions(config: _core.EngineConfig) -> None:
    assert_type(core.auth_param(b'Bearer realm="x"', "realm"), str | None)
    assert_type(core.decode(b"{}"), _core.Message | list[_core.Message | _core.JsonRpcError])
    assert_type(core.encode_error(1, -32600, "bad"), bytes)
    assert_type(core.encode_notification("notifications/initialized"), bytes)
    assert_type(core.encode_request(1, "ping"), bytes)
    assert_type(core.encode_result(1, {}), bytes)
    assert_type(core.frame_lines([b"{}"]), bytes)
    assert_type(
        core.parse_http(b""),
        tuple[list[tuple[str, bytes, dict[bytes, bytes], bytes, bool]], int, int, int, str],
    )
    assert_type(core.refusal(401, None, None, 0.0), tuple[str, float | None])
    assert_type(core.scan_reply(b"{}"), tuple[int | str | None, bool, int | None])
    assert_type(core.load("python"), ModuleType)
    assert_type(core.native_engine(config), _core.NativeEngine)
    assert_type(core.require_native_engine(), None)
