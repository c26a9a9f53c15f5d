"""Sans-IO protocol layer: lifecycle, negotiation, capabilities, correlation, progress, cancellation.

Nothing here reads or writes a socket or touches asyncio; transports feed bytes (or decoded
messages) in and drain ``Outgoing`` records that say what each message is.
"""

from __future__ import annotations

from mcpfast.sansio import mrtr, rules
from mcpfast.sansio.events import (
    BATCH,
    END,
    ERROR,
    NOTIFICATION,
    REQUEST,
    RESULT,
    Event,
    Initialized,
    NotificationReceived,
    Outgoing,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
)
from mcpfast.sansio.request import InboundRequest
from mcpfast.sansio.session import (
    CapabilityError,
    LifecycleError,
    ServerSession,
    SessionState,
    State,
    error_reply,
    unencodable_result,
)

__all__ = [
    "BATCH",
    "END",
    "ERROR",
    "NOTIFICATION",
    "REQUEST",
    "RESULT",
    "CapabilityError",
    "Event",
    "InboundRequest",
    "Initialized",
    "LifecycleError",
    "NotificationReceived",
    "Outgoing",
    "ReplyReceived",
    "RequestCancelled",
    "RequestReceived",
    "ServerSession",
    "SessionState",
    "State",
    "error_reply",
    "mrtr",
    "rules",
    "unencodable_result",
]
