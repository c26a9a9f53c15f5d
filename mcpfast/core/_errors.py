"""The shared exceptions, re-exported; they live in ``mcpfast._errors`` so that the compiled
core can import them without importing this package (which imports the compiled core)."""

from mcpfast._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    FrameTooLarge,
    JsonRpcError,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "FrameTooLarge",
    "JsonRpcError",
]
