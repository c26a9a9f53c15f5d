"""Sans-IO protocol engine: lifecycle, negotiation, capabilities, correlation, progress, cancellation.

Nothing here reads or writes a socket or touches asyncio; transports feed bytes in and drain
bytes out.
"""

from __future__ import annotations

from mcpfast.engine import mrtr, rules
from mcpfast.engine.events import (
    Event,
    Initialized,
    NotificationReceived,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
)
from mcpfast.engine.request import InboundRequest
from mcpfast.engine.session import CapabilityError, LifecycleError, ServerSession, State

__all__ = [
    "CapabilityError",
    "Event",
    "InboundRequest",
    "Initialized",
    "LifecycleError",
    "NotificationReceived",
    "ReplyReceived",
    "RequestCancelled",
    "RequestReceived",
    "ServerSession",
    "State",
    "mrtr",
    "rules",
]
