"""Versions, negotiation, method table and the schema validator."""

from __future__ import annotations

import pytest

from mcpfast import protocol
from mcpfast.protocol import errors, methods, versions


def test_versions_are_ordered_and_split_by_era() -> None:
    assert protocol.SUPPORTED_VERSIONS == tuple(sorted(protocol.SUPPORTED_VERSIONS))
    assert protocol.LATEST == "2026-07-28"
    assert protocol.LATEST_HANDSHAKE == "2025-11-25"
    assert all(protocol.is_handshake_era(v) for v in protocol.HANDSHAKE_VERSIONS)
    assert protocol.is_stateless("2026-07-28") and not protocol.is_handshake_era("2026-07-28")


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),  # stateless versions are not negotiated by initialize
        ("2024-10-07", "2025-11-25"),  # pre-release string: counter-offer the newest
        ("1999-01-01", "2025-11-25"),
        (20250618, "2025-11-25"),
    ],
)
def test_negotiate_echoes_or_counter_offers(requested: object, expected: str) -> None:
    assert protocol.negotiate(requested) == expected


def test_method_availability_by_version() -> None:
    assert methods.available("ping", "2025-11-25")
    assert not methods.available("ping", "2026-07-28")
    assert not methods.available("elicitation/create", "2025-03-26")
    assert methods.available("elicitation/create", "2025-06-18")
    assert methods.available("server/discover", "2026-07-28")
    assert not methods.available("server/discover", "2025-11-25")
    assert versions.BATCH_VERSIONS == {"2025-03-26"}


def test_error_codes() -> None:
    assert errors.resource_not_found_code("2025-11-25") == -32002
    assert errors.resource_not_found_code("2026-07-28") == -32602
    assert (errors.HEADER_MISMATCH, errors.MISSING_REQUIRED_CLIENT_CAPABILITY, errors.UNSUPPORTED_PROTOCOL_VERSION) == (
        -32020,
        -32021,
        -32022,
    )


@pytest.mark.parametrize("version", protocol.SUPPORTED_VERSIONS)
def test_validate_accepts_good_messages(version: str) -> None:
    result: dict[str, object] = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    if version >= "2026":
        result |= {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
    protocol.validate({"jsonrpc": "2.0", "id": 1, "result": result}, version, method="tools/list")
    protocol.validate({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}, version)


def test_validate_rejects_bad_messages() -> None:
    with pytest.raises(protocol.SchemaError) as info:
        protocol.validate({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{}]}}, "2025-06-18", method="tools/list")
    assert info.value.definition == "ListToolsResult"
    with pytest.raises(protocol.SchemaError):
        protocol.validate({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "loud"}}, "2025-11-25")
    with pytest.raises(protocol.SchemaError):  # resultType is required from 2026-07-28
        protocol.validate({"jsonrpc": "2.0", "id": 1, "result": {}}, "2026-07-28", method="ping")
    with pytest.raises(ValueError, match="no schema"):
        protocol.validate({"jsonrpc": "2.0", "id": 1, "result": {}}, "2024-10-07")


def test_validate_batch_and_known_fields() -> None:
    protocol.validate([{"jsonrpc": "2.0", "id": 1, "result": {}}], "2025-03-26")
    assert "title" not in protocol.known_fields("2025-03-26", "Tool")
    assert "title" in protocol.known_fields("2025-06-18", "Tool")
