"""The types the server speaks in: JSON values and objects, what a route returns, what an
application registers. Named here once, so that a signature says which of them it means.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from mcpfast.server.inline import InlineTask

__all__ = ["JSONObject", "JSONValue", "PlainOutcome", "RouteResult", "UserFunction", "UserFunctionT", "WaitingCall"]

JSONValue: TypeAlias = Any
"""Any value a JSON-RPC message carries: what the core parses (dict, list, str, int, float, bool,
None), and what its encoders take (also tuples and subclasses of the JSON types).
``Any`` rather than a recursive union: the core's own parsed values are ``Any``
(``mcpfast/_core.pyi``), and the shape of a field the protocol fixes is read as it is, after the
checks the session machine and the schemas make, with no ``isinstance`` at each read."""

JSONObject: TypeAlias = dict[str, JSONValue]
"""A JSON object: a request's params, a result, capabilities, a definition, a content block."""

RouteResult: TypeAlias = JSONObject | Awaitable[JSONObject]
"""What a route (``mcpfast.server.connection.Handler``) returns: the result at once, or an
awaitable of it when the work must wait."""

UserFunction: TypeAlias = Callable[..., Any]
"""A function an application registers (a tool, resource, prompt, completion or hook): any
parameters, and any value (the server shapes what it returns by its type at run time; an
``async def`` returns an awaitable of it)."""

UserFunctionT = TypeVar("UserFunctionT", bound=UserFunction)
"""A decorator gives back the very function it registers, with its own type."""

PlainOutcome: TypeAlias = "JSONObject | str | tuple[int, str, JSONValue]"
"""What a plain tool call answers (``Server.run_plain_tool``): the result, the text of a result of
one text content, or ``(code, message, data)`` for a JSON-RPC error."""


class WaitingCall(Protocol):
    """A plain tool call a short path started and that waits (``Server.run_tool_inline``'s
    ``PendingCall``), as a connection that adopts it sees it."""

    running: InlineTask[object]

    def cancelled(self) -> bool: ...

    def outcome(self) -> PlainOutcome: ...

    def listen(self, fn: Callable[[WaitingCall], object]) -> None: ...
