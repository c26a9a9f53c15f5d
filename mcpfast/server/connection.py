"""``Connection``: runs a ``Server``'s handlers for one session machine on asyncio.

Transports own the bytes; this class owns the work. A request is served inline, inside
``feed``: a plain sync handler is called there; an ``async def`` one is driven there to its
first wait (``mcpfast.server.inline``), so one that finishes without waiting, as most do, is
answered with no task and no turn of the event loop: the reply is in the session machine's
outbox when ``feed`` returns. Only a handler that waits (on I/O, on a ``blocking=True``
function in the thread pool, on the client) goes on in a task of its own from where it
stopped, so many run at once and finish in any order; a client's cancel cancels that task; a
server-to-client request is a future resolved by the client's reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType
from typing import Any, Final, NoReturn, TypeVar

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, McpError
from mcpfast.sansio import (
    InboundRequest,
    NotificationReceived,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
    ServerSession,
)
from mcpfast.sansio.events import Event
from mcpfast.server import inline
from mcpfast.server.content import text_result
from mcpfast.server.types import JSONObject, JSONValue, RouteResult, WaitingCall

__all__ = ["Connection", "Handler", "Routes"]

_T = TypeVar("_T")

logger = logging.getLogger("mcpfast.server")

Handler = Callable[[InboundRequest, "Connection"], RouteResult]
"""A route: ``handler(request, conn)`` returns the result (dict) at once, or an awaitable of it
when work must wait, or raises ``McpError``."""


def method_not_found(request: InboundRequest, conn: Connection) -> NoReturn:
    """The route of a method nothing serves: -32601."""
    raise McpError(METHOD_NOT_FOUND, f"method not found: {request.method}")


class Routes(dict[str, Handler]):
    """Method name -> ``Handler``; a method without an entry gets ``default`` (``routes[method]``
    never fails, so dispatching is one look-up and one call).

    Args:
        routes: the entries.
        default: the handler of every other method (-32601 unless given).
    """

    __slots__ = ("default",)

    def __init__(self, routes: Mapping[str, Handler] | None = None, default: Handler = method_not_found) -> None:
        super().__init__(routes or {})
        self.default: Final = default

    def __missing__(self, method: str) -> Handler:
        return self.default


class Connection:
    """One client connection: an session machine and the tasks serving its requests.

    It knows its collaborators only through what it is given (``Server.connect`` wires them):

    Args:
        session: the session machine (its ``on_output`` hook is the transport's to set).
        routes: what serves each admitted request (``Server.routes``, the one dispatch table),
            or one ``Handler`` for every method.
        request_timeout: seconds to wait for the client's answer to a server-to-client request.
        on_notification: called as ``on_notification(conn, event)`` for each client
            notification the session machine hands over (``NotificationReceived``).
        on_close: called with the connection once it is closed.

    Attributes:
        session: the session machine.
        task_owner: who owns the tasks this connection creates (``None``: this connection; the
            HTTP transport names the caller, as each 2026 POST is a connection of its own).
    """

    def __init__(
        self,
        session: ServerSession,
        routes: Routes | Handler,
        *,
        request_timeout: float = 60.0,
        on_notification: Callable[[Connection, NotificationReceived], None] | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.session = session
        self.request_timeout = request_timeout
        self._routes = routes if isinstance(routes, Routes) else Routes(default=routes)
        self._on_notification = on_notification
        self._on_close = on_close
        self._tasks: dict[int | str, inline.InlineTask[Any]] = {}  # the handlers that wait
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._waiters: dict[int | str, asyncio.Future[ReplyReceived]] = {}
        self._settled: asyncio.Event | None = None  # made by wait_for_slot (stdio): idle HTTP sessions stay small
        self._closed = False
        self.task_owner: str | None = None

    @property
    def in_flight(self) -> int:
        """How many client requests are being served (waiting in tasks; one answered inside ``feed`` never counts)."""
        return len(self._tasks)

    def feed(self, data: bytes | bytearray | memoryview, tag: object = None) -> None:
        """Hand one framed message to the session machine and serve what it admits.

        Plain sync handlers have answered (into the session's outbox) when this returns;
        ``tag`` comes back on the session machine's records for this input (``ServerSession.receive``).
        """
        events = self.session.receive(data, tag)
        if len(events) == 1 and type(events[0]) is RequestReceived:  # the usual case, one call and loop less
            self._start(events[0].request)
        elif events:
            self._serve_events(events)

    def feed_message(self, decoded: core.Message | list[core.Message | core.JsonRpcError] | core.JsonRpcError, tag: object = None) -> None:
        """``feed`` for a message the transport already decoded (``ServerSession.receive_message``)."""
        events = self.session.receive_message(decoded, tag)
        if len(events) == 1 and type(events[0]) is RequestReceived:  # the usual case, one call and loop less
            self._start(events[0].request)
        elif events:
            self._serve_events(events)

    def _serve_events(self, events: list[Event]) -> None:
        # Each branch tests type(event) kept in a local (one call per event), which mypy does not
        # read as narrowing the event: hence the ignores, each on the fields its branch's type has.
        for event in events:
            kind = type(event)
            if kind is RequestReceived:
                self._start(event.request)  # type: ignore[union-attr]
            elif kind is RequestCancelled:
                task = self._tasks.get(event.request_id)  # type: ignore[union-attr]
                if task is not None:
                    task.cancel()
            elif kind is ReplyReceived:
                waiter = self._waiters.pop(event.request_id, None)  # type: ignore[union-attr]
                if waiter is not None and not waiter.done():
                    waiter.set_result(event)  # type: ignore[arg-type]
            elif kind is NotificationReceived and self._on_notification is not None:
                self._on_notification(self, event)  # type: ignore[arg-type]

    def feed_oversized(self, size: int, limit: int) -> None:
        """Report a message the framer dropped for its size."""
        self.session.receive_oversized(size, limit)

    async def wait_for_slot(self, limit: int) -> None:
        """Wait until fewer than ``limit`` requests are in flight (input backpressure)."""
        while len(self._tasks) >= limit:
            settled = self._settled
            if settled is None:
                settled = self._settled = asyncio.Event()
            settled.clear()
            await settled.wait()

    def _start(self, request: InboundRequest) -> None:
        session = self.session
        rid = request.id
        try:
            outcome = self._routes[request.method](request, self)
        except McpError as exc:
            session.respond_error(rid, exc.code, exc.message, exc.data)
            return
        except Exception:
            logger.exception("handler for %s failed", request.method)
            session.respond_error(rid, INTERNAL_ERROR, "internal error")
            return
        if type(outcome) is dict:
            session.respond(rid, outcome)  # an unencodable result is answered -32603 by the session machine
            return
        if type(outcome) is not CoroutineType:
            if not inspect.isawaitable(outcome):
                session.respond(rid, outcome)
                return
            outcome = _awaited(outcome)
        running = inline.start(outcome, self._finished, request)
        if not running.done():  # it waits: driven on from the loop, answered by _finished
            self._tasks[rid] = running

    def adopt(self, message: core.Message, tag: object, pending: WaitingCall) -> None:
        """Serve a request whose tool a transport's short path started and that waits
        (``Server.run_tool_inline``'s ``PendingCall``), from now on as if ``feed`` had started
        it: held in flight by the session machine (``ServerSession.adopt``; ``tag`` on its
        records), cancelled by the client's cancel or the connection's end, and answered when
        it finishes as ``feed``'s handlers are.

        Raises:
            ValueError: the session machine would not have admitted ``message`` directly.
        """
        request = self.session.adopt(message, tag)
        self._tasks[request.id] = pending.running
        pending.listen(functools.partial(self._adopted, request))

    def _adopted(self, request: InboundRequest, pending: WaitingCall) -> None:
        """An adopted call has finished: its outcome (``run_plain_tool``'s shapes) answered as
        ``_finished`` answers a handler's."""
        if pending.cancelled():
            self._finished(request, None, asyncio.CancelledError())  # type: ignore[arg-type]
            return
        outcome = pending.outcome()
        if type(outcome) is tuple:
            self._finished(request, None, McpError(*outcome))  # type: ignore[arg-type]
        else:
            self._finished(request, text_result(outcome) if type(outcome) is str else outcome, None)  # type: ignore[arg-type]

    def _finished(self, request: InboundRequest, result: JSONObject, exc: BaseException | None) -> None:
        """A handler's coroutine has finished (``inline.Done``): its answer, in the step that finished it."""
        rid = request.id
        session = self.session
        if self._tasks:
            self._tasks.pop(rid, None)
        if exc is None:
            session.respond(rid, result)  # an unencodable result: -32603 from the session machine
        elif isinstance(exc, McpError):
            session.respond_error(rid, exc.code, exc.message, exc.data)
        elif isinstance(exc, asyncio.CancelledError):
            # The client's cancel: its answer is dropped by the session machine. Else (shutdown)
            # none: the task ends cancelled.
            if session.is_cancelled(rid):
                session.respond_error(rid, INTERNAL_ERROR, "cancelled")
        elif isinstance(exc, Exception):
            logger.error("handler for %s failed", request.method, exc_info=exc)
            session.respond_error(rid, INTERNAL_ERROR, "internal error")
        if self._settled is not None:
            self._settled.set()

    def run_hook(self, hook: Callable[[Connection], object], what: str) -> None:
        """Run an application hook for this connection (``hook(conn)``; an awaitable in a task of it)."""
        try:
            outcome = hook(self)
        except Exception:
            logger.exception("the %s handler failed", what)
            return
        if inspect.isawaitable(outcome):
            task = asyncio.get_running_loop().create_task(self._hook_task(outcome, what))
            self._side_tasks.add(task)
            task.add_done_callback(self._side_tasks.discard)

    @staticmethod
    async def _hook_task(outcome: Awaitable[object], what: str) -> None:
        try:
            await outcome
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the %s handler failed", what)

    async def request_client(
        self, method: str, params: JSONObject | None, *, related: int | str | None = None, timeout: float | None = None
    ) -> JSONValue:
        """Send a request to the client and wait for the result.

        Raises:
            McpError: the client answered with an error (or the session machine refused to send).
            TimeoutError: no answer in time; the request is cancelled at the client.
        """
        request_id = self.session.send_request(method, params, related=related)
        waiter: asyncio.Future[ReplyReceived] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = waiter
        try:
            async with asyncio.timeout(timeout if timeout is not None else self.request_timeout):
                reply = await waiter
        except (asyncio.CancelledError, TimeoutError):
            self._waiters.pop(request_id, None)
            self.session.cancel_request(request_id, "timed out" if not self._closed else "server shutting down")
            raise
        if reply.error is not None:
            error = reply.error
            raise McpError(error.get("code", INTERNAL_ERROR), error.get("message", ""), error.get("data"))
        return reply.result

    async def list_roots(self, timeout: float | None = None) -> list[JSONObject]:
        """Ask the client for its roots (``roots/list``), e.g. from an ``on_roots_changed`` hook.

        Raises:
            CapabilityError: the client did not declare ``roots``.
            McpError: the client answered with an error or without a roots array.
        """
        result = await self.request_client(m.ROOTS_LIST, None, timeout=timeout)
        roots = result.get("roots") if isinstance(result, dict) else None
        if not isinstance(roots, list):
            raise McpError(INTERNAL_ERROR, "the client answered roots/list without a roots array")
        return roots

    def close_now(self) -> list[asyncio.Task[None]]:
        """End the connection without waiting: cancel the work in flight.

        Returns the cancelled tasks (empty when nothing was running), for a caller that wants
        to wait until they have stopped (``close`` does).
        """
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)
        self.session.close_listens()
        # The transport's output hook refers to the session machine (which holds the hook):
        # dropped here, the two are freed with the connection instead of by the collector.
        self.session.on_output = None
        tasks = list(self._side_tasks)
        for task in tasks:
            task.cancel()
        for running in self._tasks.values():
            running.cancel()
            tasks.append(running.get_loop().create_task(_stopped(running)))
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.cancel()
        self._waiters.clear()
        return tasks

    async def close(self) -> None:
        """End the connection: cancel the work in flight and wait for it to stop."""
        tasks = self.close_now()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _stopped(running: inline.InlineTask[Any]) -> None:
    """Done once a cancelled handler has stopped (``_finished`` had its outcome: nothing to raise)."""
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await running


async def _awaited(outcome: Awaitable[_T]) -> _T:
    """A handler's awaitable that is no coroutine (a future, say), as one ``inline.start`` takes."""
    return await outcome
