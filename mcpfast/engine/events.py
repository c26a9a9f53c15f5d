"""What the engine tells its caller after reading input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfast.engine.request import InboundRequest

__all__ = ["Event", "Initialized", "NotificationReceived", "ReplyReceived", "RequestCancelled", "RequestReceived"]


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A request the application must answer (with ``ServerSession.respond``/``respond_error``)."""

    request: InboundRequest


@dataclass(frozen=True, slots=True)
class RequestCancelled:
    """The client cancelled a request in flight: stop its work; any reply will be suppressed."""

    request_id: int | str
    reason: str | None


@dataclass(frozen=True, slots=True)
class ReplyReceived:
    """The client answered a server-to-client request.

    Attributes:
        request_id: the id the server gave the request.
        method: the method of that request.
        result: the parsed result, or ``None`` for an error reply.
        error: the error object (``code``, ``message``, ``data``?), or ``None``.
    """

    request_id: int | str
    method: str
    result: Any
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Initialized:
    """The client sent ``notifications/initialized``: the session is fully operational."""


@dataclass(frozen=True, slots=True)
class NotificationReceived:
    """A client notification the engine does not consume itself (e.g. roots/list_changed)."""

    method: str
    params: Any


Event = RequestReceived | RequestCancelled | ReplyReceived | Initialized | NotificationReceived
