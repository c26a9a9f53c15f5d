"""``Connection``: runs a ``Server``'s handlers for one engine session on asyncio.

Transports own the bytes; this class owns the tasks. Each request is its own task, so many
run at once and finish in any order; a client's cancel cancels the task; a server-to-client
request is a future resolved by the client's reply.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from mcpfast.engine import (
    InboundRequest,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
    ServerSession,
)
from mcpfast.protocol.errors import INTERNAL_ERROR, McpError

if TYPE_CHECKING:
    from mcpfast.server.app import Server

__all__ = ["Connection"]

logger = logging.getLogger("mcpfast.server")


class Connection:
    """One client connection: an engine session and the tasks serving its requests.

    Attributes:
        server: the application.
        session: the engine session (its ``on_output`` hook is the transport's to set).
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.session: ServerSession = server.new_session()
        self._tasks: dict[int | str, asyncio.Task[None]] = {}
        self._waiters: dict[int | str, asyncio.Future[ReplyReceived]] = {}
        self._settled = asyncio.Event()
        self._closed = False
        server._connections.add(self)

    @property
    def in_flight(self) -> int:
        """How many client requests are being served."""
        return len(self._tasks)

    def feed(self, data: bytes) -> None:
        """Hand one framed message to the engine and start work for what it admits."""
        for event in self.session.receive(data):
            if isinstance(event, RequestReceived):
                request = event.request
                self._tasks[request.id] = asyncio.get_running_loop().create_task(self._serve(request))
            elif isinstance(event, RequestCancelled):
                task = self._tasks.get(event.request_id)
                if task is not None:
                    task.cancel()
            elif isinstance(event, ReplyReceived):
                waiter = self._waiters.pop(event.request_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(event)

    def feed_oversized(self, size: int, limit: int) -> None:
        """Report a message the framer dropped for its size."""
        self.session.receive_oversized(size, limit)

    async def wait_for_slot(self, limit: int) -> None:
        """Wait until fewer than ``limit`` requests are in flight (input backpressure)."""
        while len(self._tasks) >= limit:
            self._settled.clear()
            await self._settled.wait()

    async def _serve(self, request: InboundRequest) -> None:
        rid = request.id
        session = self.session
        try:
            result = await self.server.dispatch(request, self)
        except asyncio.CancelledError:
            if not session.is_cancelled(rid):
                raise  # shutdown, not the client's cancel: let the task end cancelled
            session.respond_error(rid, INTERNAL_ERROR, "cancelled")  # dropped by the engine
        except McpError as exc:
            session.respond_error(rid, exc.code, exc.message, exc.data)
        except Exception:
            logger.exception("handler for %s failed", request.method)
            session.respond_error(rid, INTERNAL_ERROR, "internal error")
        else:
            try:
                session.respond(rid, result)
            except TypeError as exc:  # a result JSON cannot hold is the handler's bug
                logger.exception("result of %s cannot be encoded", request.method)
                session.respond_error(rid, INTERNAL_ERROR, f"result cannot be encoded: {exc}")
        finally:
            self._tasks.pop(rid, None)
            self._settled.set()

    async def request_client(
        self, method: str, params: dict[str, Any] | None, *, related: int | str | None = None, timeout: float | None = None
    ) -> Any:
        """Send a request to the client and wait for the result.

        Raises:
            McpError: the client answered with an error (or the engine refused to send).
            TimeoutError: no answer in time; the request is cancelled at the client.
        """
        request_id = self.session.send_request(method, params, related=related)
        waiter: asyncio.Future[ReplyReceived] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = waiter
        try:
            async with asyncio.timeout(timeout if timeout is not None else self.server.request_timeout):
                reply = await waiter
        except (asyncio.CancelledError, TimeoutError):
            self._waiters.pop(request_id, None)
            self.session.cancel_request(request_id, "timed out" if not self._closed else "server shutting down")
            raise
        if reply.error is not None:
            error = reply.error
            raise McpError(error.get("code", INTERNAL_ERROR), error.get("message", ""), error.get("data"))
        return reply.result

    async def close(self) -> None:
        """End the connection: cancel the work in flight and wait for it to stop."""
        self._closed = True
        self.server._connections.discard(self)
        self.session.close_listens()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.cancel()
        self._waiters.clear()
