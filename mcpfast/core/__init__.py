"""The one doorway to the JSON-RPC core.

Loads the compiled implementation (``mcpfast._core``) or its pure-Python twin
(``mcpfast.core._python``). ``MCPFAST_CORE=rust`` or ``MCPFAST_CORE=python`` forces the choice;
a forced implementation that cannot load raises ``ImportError``: there is no silent fallback.
Unset (or ``auto``), the compiled core is used when it loads and the twin otherwise, with a
``RuntimeWarning`` so that a broken build is never a quiet slowdown.

``IMPLEMENTATION`` names the one loaded: ``"rust"`` or ``"python"``.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING

from mcpfast._version import __version__
from mcpfast.core._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    FrameTooLarge,
    JsonRpcError,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_EVENT",
    "DEFAULT_MAX_LINE",
    "HAS_LANE",
    "HAS_NATIVE_ENGINE",
    "IMPLEMENTATION",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "DrainRow",
    "EngineConfig",
    "FrameTooLarge",
    "HttpLane",
    "JsonRpcError",
    "LineFramer",
    "Message",
    "MixItem",
    "NativeEngine",
    "SseDecoder",
    "SseEncoder",
    "SseEvent",
    "StdioLane",
    "auth_param",
    "decode",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "frame_lines",
    "load",
    "native_engine",
    "parse_http",
    "refusal",
    "require_native_engine",
    "scan_reply",
]


def load(choice: str) -> ModuleType:
    """Import one implementation by name (``"rust"`` or ``"python"``) and check it.

    Raises:
        ImportError: the implementation cannot be loaded, or the compiled core was built from
            another version of mcpfast.
        ValueError: an unknown name.
    """
    if choice == "python":
        from mcpfast.core import _python

        return _python
    if choice == "rust":
        try:
            from mcpfast import _core
        except ImportError as exc:
            raise ImportError(
                "MCPFAST_CORE=rust but the compiled core mcpfast._core cannot be imported "
                f"({exc}); build it with `make install` (maturin develop --release)"
            ) from exc
        if _core.__version__ != __version__:
            raise ImportError(
                f"mcpfast._core was built for mcpfast {_core.__version__}, but the package is {__version__}; rebuild it with `make install`"
            )
        return _core
    raise ValueError(f"MCPFAST_CORE must be 'rust', 'python' or 'auto', not {choice!r}")


def _select() -> tuple[str, ModuleType]:
    choice = os.environ.get("MCPFAST_CORE", "auto").strip().lower() or "auto"
    if choice != "auto":
        return choice, load(choice)
    try:
        return "rust", load("rust")
    except ImportError as exc:
        warnings.warn(f"{exc}; falling back to the pure-Python core", RuntimeWarning, stacklevel=3)
        return "python", load("python")


IMPLEMENTATION, _impl = _select()

# The names below are the loaded implementation's own objects, bound once: the hot path reads
# these module attributes, so there is no wrapper between a caller and the core. mypy reads them
# from mcpfast/_core.pyi, the contract both implementations honour (`make lint` runs stubtest of
# the stub against each of them), so a call of the core is typed whichever one loads.
if TYPE_CHECKING:
    from mcpfast._core import (
        DEFAULT_MAX_DEPTH,
        DEFAULT_MAX_EVENT,
        DEFAULT_MAX_LINE,
        DrainRow,
        EngineConfig,
        HttpLane,
        LineFramer,
        Message,
        MixItem,
        NativeEngine,
        SseDecoder,
        SseEncoder,
        SseEvent,
        StdioLane,
        auth_param,
        decode,
        encode_error,
        encode_notification,
        encode_request,
        encode_result,
        frame_lines,
        parse_http,
        refusal,
        scan_reply,
    )
else:
    DEFAULT_MAX_DEPTH = _impl.DEFAULT_MAX_DEPTH
    DEFAULT_MAX_EVENT = _impl.DEFAULT_MAX_EVENT
    DEFAULT_MAX_LINE = _impl.DEFAULT_MAX_LINE
    Message = _impl.Message
    SseEvent = _impl.SseEvent
    LineFramer = _impl.LineFramer
    SseDecoder = _impl.SseDecoder
    SseEncoder = _impl.SseEncoder
    StdioLane = _impl.StdioLane
    decode = _impl.decode
    encode_error = _impl.encode_error
    encode_notification = _impl.encode_notification
    encode_request = _impl.encode_request
    encode_result = _impl.encode_result
    frame_lines = _impl.frame_lines
    parse_http = _impl.parse_http
    refusal = _impl.refusal
    auth_param = _impl.auth_param
    scan_reply = _impl.scan_reply
    # The compiled core alone has these; with the pure-Python core they are None. They are typed
    # as the classes: code that uses them checks HAS_NATIVE_ENGINE / HAS_LANE (or calls
    # require_native_engine) first.
    NativeEngine = getattr(_impl, "NativeEngine", None)
    EngineConfig = getattr(_impl, "EngineConfig", None)
    MixItem = getattr(_impl, "MixItem", None)
    DrainRow = getattr(_impl, "DrainRow", None)
    HttpLane = getattr(_impl, "HttpLane", None)

HAS_NATIVE_ENGINE: bool = getattr(_impl, "NativeEngine", None) is not None
"""Whether the native load engine (``NativeEngine``, ``EngineConfig``, ``MixItem``,
``DrainRow``) can be used: the compiled core only."""
HAS_LANE: bool = getattr(_impl, "HttpLane", None) is not None
"""Whether the native HTTP server can answer sync tool calls through ``HttpLane``: the compiled
core only. With the pure-Python core every request takes the transport's full path, with the
same replies."""


def require_native_engine() -> None:
    """Check that the native engine (and its config types) can be used.

    Raises:
        RuntimeError: the compiled core is not in use (``MCPFAST_CORE=python``, or not built).
    """
    if not HAS_NATIVE_ENGINE:
        raise RuntimeError(
            f"the native load engine needs the compiled core, but mcpfast.core is {IMPLEMENTATION!r} "
            "(build it with `make install`, and do not set MCPFAST_CORE=python)"
        )


def native_engine(config: EngineConfig) -> NativeEngine:
    """A :class:`mcpfast._core.NativeEngine` for ``config``.

    Raises:
        RuntimeError: the compiled core is not in use (``MCPFAST_CORE=python``, or not built).
        ValueError: the config's TLS files cannot be used or its host has no address (the
            message names the field).
    """
    require_native_engine()
    return NativeEngine(config)
