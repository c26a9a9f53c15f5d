"""What the session machine tells its caller after reading input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from mcpfast.sansio.request import InboundRequest

__all__ = [
    "BATCH",
    "END",
    "ERROR",
    "NOTIFICATION",
    "REQUEST",
    "RESULT",
    "Event",
    "Initialized",
    "NotificationReceived",
    "Outgoing",
    "ReplyReceived",
    "RequestCancelled",
    "RequestReceived",
]


class RequestReceived(NamedTuple):
    """A request the application must answer (with ``ServerSession.respond``/``respond_error``).

    A tuple rather than a frozen dataclass: one is made per request, and a frozen dataclass's
    ``__init__`` sets its field through ``object.__setattr__``.
    """

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
    """A client notification the session machine does not consume itself (e.g. roots/list_changed)."""

    method: str
    params: Any


Event = RequestReceived | RequestCancelled | ReplyReceived | Initialized | NotificationReceived


RESULT: Final = "result"
"""A result answering ``request_id``."""
ERROR: Final = "error"
"""An error answering ``request_id`` (``None``: a message whose id could not be read)."""
NOTIFICATION: Final = "notification"
"""A notification, sent for ``request_id`` (progress, logs, a listen stream's changes) or for none."""
REQUEST: Final = "request"
"""A server-to-client request, sent for ``request_id`` or for none."""
BATCH: Final = "batch"
"""The array answering a whole batch (JSON-RPC 2.0 §6)."""
END: Final = "end"
"""No bytes: ``request_id`` ended without an answer (it was cancelled, so none is sent)."""


class Outgoing(NamedTuple):
    """One message the session machine wants written, saying what it is (the h11 way: nobody re-parses it).

    Attributes:
        data: the encoded message, without a newline (``b""`` for ``END``).
        kind: ``RESULT``, ``ERROR``, ``NOTIFICATION``, ``REQUEST``, ``BATCH`` or ``END``.
        request_id: the client request it answers or is sent for; ``None`` when unrelated.
        code: the JSON-RPC error code of an ``ERROR``, else ``None``.
        final: it ends the request (or batch) it answers: nothing more comes for that ``tag``.
        tag: what the transport passed to ``receive``/``receive_message`` with the message this
            record answers or is sent for (e.g. the HTTP stream of the POST); ``None`` otherwise.
        by_engine: an answer the session machine made itself, no application handler having seen the
            request (a parse or protocol error, ``ping``, ``initialize``, ``logging/setLevel``,
            ``server/discover``; a batch none of whose members reached the application).
            ``False`` for answers through ``respond``/``respond_error`` and for every record
            that is not an answer.
    """

    data: bytes
    kind: str
    request_id: int | str | None
    code: int | None
    final: bool
    tag: Any
    by_engine: bool = False
