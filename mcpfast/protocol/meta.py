"""The ``_meta`` keys the protocol reserves (``io.modelcontextprotocol/*``), one name each."""

from __future__ import annotations

from typing import Final

__all__ = [
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
    "TASKS_EXTENSION",
]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
"""2026-07-28: the version a request is sent under (every request)."""
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
"""2026-07-28: the capabilities that apply to a request."""
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
"""2026-07-28: the client's ``Implementation`` (optional)."""
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
"""2026-07-28: the least severe log level a request wants (no logs without it)."""
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
"""2026-07-28: the server's ``Implementation`` on a result."""
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
"""2026-07-28: which ``subscriptions/listen`` stream a notification belongs to."""
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""2026-07-28 extension id of tasks (SEP-2663), under ``capabilities.extensions`` on both sides."""
