"""The single source of truth for protocol facts: versions, methods, capabilities, codes, schemas.

Everything else in mcpfast names these constants instead of spelling strings and numbers.
"""

from __future__ import annotations

from mcpfast.protocol import errors, methods
from mcpfast.protocol.errors import McpError
from mcpfast.protocol.schema import SchemaError, TranscriptValidator, known_fields, load_schema, validate, validate_result
from mcpfast.protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST,
    LATEST_HANDSHAKE,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    is_handshake_era,
    is_stateless,
    negotiate,
)

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST",
    "LATEST_HANDSHAKE",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "McpError",
    "SchemaError",
    "TranscriptValidator",
    "errors",
    "is_handshake_era",
    "is_stateless",
    "known_fields",
    "load_schema",
    "methods",
    "negotiate",
    "validate",
    "validate_result",
]
