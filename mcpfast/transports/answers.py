"""What the HTTP transport's ``handle`` may return besides a reply tuple, and how it is sent.

``HttpTransport.handle`` answers a request with one of:

* a **reply** ``(status, headers, body)``, known at once (most requests);
* a **deferred** answer: an async callable ``(receive, send)`` run with the request's ASGI
  channels (streams, handlers that wait);
* a ``Later``: an answer known once a future is done (a session kept in, or ended in, a
  shared store; a handler's reply, which may turn out to be a stream): one reply, or a
  deferred answer to run then. It is also a deferred answer (calling it sends the reply, or
  runs the deferred one, over ASGI), so every runner and every wrapper that runs deferred
  answers takes it unchanged; the native HTTP server instead writes a reply from the future's
  callback: no task, no ASGI messages.

This module does no I/O of its own and imports nothing of the transport's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Union

__all__ = [
    "DISCONNECT",
    "OK_EMPTY",
    "Deferred",
    "Disconnect",
    "Later",
    "Outcome",
    "Reply",
    "after",
    "send_reply",
    "wait_disconnect",
    "watch_disconnect",
]

logger = logging.getLogger("mcpfast.transports.http")

Reply = tuple[int, list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...], bytes]
"""``(status, headers, body)``: a whole HTTP answer (``content-length`` is the server's to add)."""
Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

DISCONNECT: Final = {"type": "http.disconnect"}
"""The ASGI message of a client that went away."""
OK_EMPTY: Final[Reply] = (200, (), b"")
"""200 with no body (a DELETE that ended its session)."""
_FAILED: Final[Reply] = (500, ((b"content-type", b"text/plain"),), b"internal error")


async def send_reply(send: Send, status: int, headers: Iterable[tuple[bytes, bytes]] = (), body: bytes = b"") -> None:
    """Send a whole ``(status, headers, body)`` reply over ASGI."""
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


Deferred = Callable[[Receive, Send], Awaitable[None]]
"""An answer that streams or waits: run with the request's ASGI ``receive`` and ``send``."""
Outcome = Reply | Deferred
"""What a ``Later`` resolves to: a reply, or a deferred answer to run from then on."""
Then = Callable[["asyncio.Future[Any]"], Union[Reply, Deferred, "Later"]]


class Later:
    """An answer known once ``future`` is done: ``then(future)`` makes it.

    ``then`` runs as the future's done callback whether or not anyone still waits for the
    answer (a client that went away), so what it does besides making the answer (caching a
    session, ending one) always happens. It returns a reply, a deferred answer (the answer
    turned out to stream), or another ``Later`` (a second wait, e.g. handler tasks winding
    down), whose answer is then the answer. An exception in ``then`` is logged and answered 500.

    ``abandon()``, if given, is called when nobody waits any more (``cancel``): for work that
    only the client that went away would read (a 2026-07-28 call's tool).
    """

    __slots__ = ("_abandon", "_listener", "_reply", "_then")

    def __init__(self, future: asyncio.Future[Any], then: Then, abandon: Callable[[], object] | None = None) -> None:
        self._then = then
        self._abandon = abandon
        self._reply: Outcome | None = None
        self._listener: Callable[[Outcome], None] | None = None
        future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        try:
            outcome = self._then(future)
        except Exception:
            logger.exception("a deferred reply failed")
            outcome = _FAILED
        if type(outcome) is Later:
            outcome.listen(self._resolve)
        else:
            self._resolve(outcome)  # type: ignore[arg-type]

    def _resolve(self, outcome: Outcome) -> None:
        self._reply = outcome
        listener, self._listener = self._listener, None
        if listener is not None:
            listener(outcome)

    @property
    def reply(self) -> Outcome | None:
        """The answer, once known: a reply tuple, or a deferred answer to run."""
        return self._reply

    def listen(self, callback: Callable[[Outcome], None]) -> None:
        """Call ``callback(outcome)`` once the answer is known (now, if it is); one listener at a time."""
        if self._reply is not None:
            callback(self._reply)
        else:
            self._listener = callback

    def cancel(self) -> None:
        """Nobody waits any more (the connection is closing): the answer, when made, goes
        nowhere, and the work it waits for is abandoned if it was made so."""
        self._listener = None
        abandon, self._abandon = self._abandon, None
        if abandon is not None and self._reply is None:
            abandon()

    def __call__(self, receive: Receive, send: Send) -> Awaitable[None]:
        """Wait for the answer and send it over ASGI (a deferred answer's signature)."""
        return self._send(receive, send)

    async def _send(self, receive: Receive, send: Send) -> None:
        outcome = self._reply
        if outcome is None:
            waiter: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

            def wake(made: Outcome) -> None:
                if not waiter.done():  # a waiter cancelled meanwhile (the client went away)
                    waiter.set_result(made)

            self.listen(wake)
            outcome = await waiter
        if type(outcome) is tuple:
            await send_reply(send, *outcome)
        else:
            await outcome(receive, send)  # type: ignore[operator]


def after(future: asyncio.Future[Any], reply: Reply) -> Later:
    """``reply`` once ``future`` is done, whatever its outcome (e.g. cancelled handlers wound down)."""
    return Later(future, lambda _: reply)


class Disconnect:
    """The ASGI ``receive`` of a deferred answer whose request was read whole (a server's own):
    it waits for the client to go. ``lost``, done then, may be watched directly, without a task
    reading ``receive`` (``watch_disconnect``); nobody but the server resolves or cancels it."""

    __slots__ = ("lost",)

    def __init__(self, lost: asyncio.Future[None]) -> None:
        self.lost = lost

    async def __call__(self) -> dict[str, Any]:
        # Shielded: a waiter cancelled (its answer is done) must not cancel the connection's future.
        await asyncio.shield(self.lost)
        return DISCONNECT


def watch_disconnect(receive: Receive) -> tuple[asyncio.Future[Any], bool]:
    """A future done once the client is gone, and whether it is the caller's to cancel when it
    stops watching: the server's own for a ``Disconnect`` (no task; not to be cancelled), else
    a task reading ``receive`` until ``http.disconnect``."""
    if type(receive) is Disconnect:
        return receive.lost, False
    return asyncio.ensure_future(wait_disconnect(receive)), True


async def wait_disconnect(receive: Receive) -> None:
    """Read ``receive`` until the client is gone."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
