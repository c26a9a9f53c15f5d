"""Requests in flight on a stream the adapter reads by itself (stdio, legacy HTTP+SSE): waiters
keyed by request id, and what happens to them when a reply cannot be matched or the stream dies.
No I/O here; a waiter is anything with ``set_exception`` (a gevent ``AsyncResult`` in practice)."""

from __future__ import annotations

from typing import Any

from mcpfast.client.errors import ConnectionFailure, McpClientError
from mcpfast.client.session import ClientSession

__all__ = ["InFlight"]


class InFlight:
    """Mixin for adapters that correlate replies to waiting callers by id."""

    _waiters: dict[int, Any]
    session: ClientSession
    dead: str | None
    #: The ConnectionFailure message given to every waiter when the stream dies.
    _dead_message = "connection closed"

    def _fail_oldest(self, exc: McpClientError) -> None:
        """A reply nobody can be matched to (unknown id, not JSON) fails the oldest request."""
        for rid in self._waiters:
            waiter = self._waiters.pop(rid)
            pending = self.session.pending.pop(rid, None)
            if pending is not None:
                self.session.forget(pending)
            waiter.set_exception(exc)
            return

    def _fail_all(self, why: str) -> None:
        """The stream died: every waiter gets a ConnectionFailure saying why."""
        if self.dead is None:
            self.dead = why
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.set_exception(ConnectionFailure(self._dead_message, why))
