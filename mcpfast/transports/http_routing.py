"""Routing the session machine's records to HTTP streams: a plain function of each ``Outgoing``.

Over HTTP every message must go to exactly one stream. The transport feeds each POST's
message with that POST's ``Stream`` as the session machine's ``tag``; the session machine gives the tag back on
every record that answers the message or is sent for a request it carried (progress, logs,
server-to-client requests, a listen stream's notifications), and ``final`` on the record that
ends it. Untagged records go to the session's standing stream (the GET stream, the 2024-11-05
SSE stream). No protocol rule lives here: the session machine decides *what* is sent; this only puts
each record where its tag says.

``Heartbeat`` tells the streams served as SSE when a keep-alive comment is due: one timer for all
of them, not one per stream (a server holding tens of thousands of idle GET streams would
otherwise hold as many timers, re-armed at every event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from mcpfast.sansio import Outgoing, ServerSession

if TYPE_CHECKING:
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection
    from mcpfast.transports.event_store import EventStore

__all__ = ["Heartbeat", "Stream", "connect", "router"]

BACKLOG: Final = 1024
"""Messages a detached stream without an event store keeps for the next reader."""


class Stream:
    """The messages of one HTTP response (or of a standing SSE stream), in order.

    Attributes:
        key: the stream's name inside its session (event ids start with it).
        answer: the session machine's ``final`` record for this stream's request, once it came.
        closed: no more messages will come.
        keep: stays open after its requests are answered (GET, listen, legacy SSE).
        sse: the response became an SSE stream (else it may still be answered as JSON).
        attached: an HTTP response is currently reading this stream.
    """

    __slots__ = ("answer", "attached", "buf", "closed", "keep", "key", "session_id", "sse", "store", "waiter")

    def __init__(self, key: str = "", *, keep: bool = False, session_id: str | None = None, store: EventStore | None = None):
        self.key = key
        self.buf: list[bytes] = []  # a list, not a deque: an idle session's stream costs 56 bytes, not 600
        self.waiter: asyncio.Future[None] | None = None
        self.answer: Outgoing | None = None
        self.closed = False
        self.keep = keep
        self.sse = False
        self.attached = True
        self.session_id = session_id
        self.store = store

    def push(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.attached:
            if self.sse and self.store is not None and self.session_id is not None:
                self.store.append(self.session_id, self.key, data)
                return
            if len(self.buf) >= BACKLOG:
                del self.buf[0]
        self.buf.append(data)
        if self.waiter is not None:
            self._wake()

    def take(self, record: Outgoing) -> None:
        """one session machine record for this stream: its bytes, and the end of the stream if ``final``."""
        data = record.data
        if data:
            self.push(data)
        if record.final:
            self.answer = record
            if not self.keep:
                self.finish()

    def as_json(self, json_response: bool) -> bool:
        """Whether the request is answered with one JSON body rather than SSE (the server's choice per request).

        Only an answer that came alone (the stream closed with it as its only message) can be.
        It is when the transport answers with JSON (``json_response``), and also otherwise when
        the session machine made it itself (``by_engine``: a protocol error, ``ping``...), as no handler
        ran and there was nothing to stream.
        """
        answer = self.answer
        return (
            answer is not None and (json_response or answer.by_engine) and self.closed and len(self.buf) == 1 and answer.data is self.buf[0]
        )

    def hand_over(self) -> Outgoing | None:
        """The answer, once: the stream lets go of it, so that the two are freed when the
        request is done (the record's tag is this stream: kept, they would make a cycle that
        only the garbage collector frees, a cost on every request)."""
        answer, self.answer = self.answer, None
        return answer

    @property
    def empty(self) -> bool:
        """No message is waiting to be sent."""
        return not self.buf

    def drain(self) -> list[bytes]:
        """Take every message waiting to be sent, in order."""
        out, self.buf = self.buf, []
        return out

    def finish(self) -> None:
        if not self.closed:
            self.closed = True
            if self.waiter is not None:
                self._wake()

    def nudge(self, *_: object) -> None:
        """Wake the reader without a message, to look again (its client gone, a keep-alive
        due); its arguments are ignored, so that it serves as a future's done callback."""
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """A future resolved when a message arrives or the stream closes."""
        waiter = self.waiter
        if waiter is None or waiter.done():
            waiter = self.waiter = asyncio.get_running_loop().create_future()
        return waiter


class Heartbeat:
    """When each stream served as SSE is due a keep-alive comment, on one timer for them all.

    Every half ``period`` each stream is looked at once: one that sent nothing since it was last
    looked at is marked due and woken (``Stream.nudge``). The streams are looked at in slices of
    at most ``per_tick`` spread over the half period, in the order they came: thousands of idle
    streams woken in one loop turn would stop the server for tens of milliseconds each time. A
    stream keeps its place in that order (others only leave before it), so it is looked at at
    most a half period apart: once it has had a comment, it is never silent for more than a
    ``period``; its first comes between a half and one and a half periods after it started. A
    stream is in from ``add`` to ``discard``, and says it sent with ``sent``; its reader takes a
    due comment with ``take_due``.
    """

    __slots__ = ("_due", "_handle", "_loop", "_per", "_pos", "_quiet", "_round", "_step", "half", "per_tick")

    MIN_STEP = 0.005
    """Seconds: the shortest wait between two slices (more streams make bigger slices, not more ticks)."""

    def __init__(self, period: float, per_tick: int = 256) -> None:
        if per_tick < 1:
            raise ValueError("per_tick must be at least 1")
        self.half = period / 2
        self.per_tick = per_tick
        self._quiet: dict[Stream, bool] = {}  # each stream: nothing sent since it was last looked at
        self._due: set[Stream] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._round: list[Stream] = []  # this half period's streams, in the order they came
        self._pos = 0  # the next slice's start in ``_round``
        self._step = self.half  # seconds between this round's slices
        self._per = per_tick  # streams in each of this round's slices

    def add(self, stream: Stream) -> None:
        self._quiet[stream] = False
        loop = asyncio.get_running_loop()
        if self._handle is None or self._loop is not loop:
            self._loop = loop
            self._round, self._pos = [], 0
            self._handle = loop.call_later(self.half, self._tick)

    def sent(self, stream: Stream) -> None:
        """``stream`` sent something (no comment is due for a while)."""
        if stream in self._quiet:
            self._quiet[stream] = False

    def take_due(self, stream: Stream) -> bool:
        """Whether a comment is due on ``stream`` (taken: the reader sends it)."""
        if stream in self._due:
            self._due.discard(stream)
            return True
        return False

    def discard(self, stream: Stream) -> None:
        self._quiet.pop(stream, None)
        self._due.discard(stream)

    def __len__(self) -> int:
        return len(self._quiet)

    def _tick(self) -> None:
        self._handle = None
        quiet = self._quiet
        if self._pos >= len(self._round):  # a new half period: every stream once, in slices
            if not quiet:
                self._round = []
                return  # the next stream added starts the timer again
            # (a stream keeps its place in the order as others leave: looked at no later in the
            # next round than in this one, so never more than a half period apart)
            self._round, self._pos = list(quiet), 0
            slices = min(-(-len(self._round) // self.per_tick), max(1, int(self.half / self.MIN_STEP)))
            self._step = self.half / slices
            self._per = -(-len(self._round) // slices)
        per = self._per
        due = self._due
        for stream in self._round[self._pos : self._pos + per]:
            silent = quiet.get(stream)
            if silent is None:
                continue  # gone since the round began
            if silent:
                due.add(stream)
                stream.nudge()
            else:
                quiet[stream] = True
        self._pos += per
        loop = self._loop
        if loop is not None and not loop.is_closed():
            self._handle = loop.call_later(self._step, self._tick)


def router(session: ServerSession, default: Stream) -> Callable[[], None]:
    """The session's ``on_output`` hook: each record to its tag's stream (untagged: ``default``)."""
    take = session.records_to_send

    def on_output() -> None:
        for record in take():
            tag = record.tag
            (default if tag is None else tag).take(record)

    return on_output


def connect(server: Server, default: Stream) -> Connection:
    """A ``Connection`` for ``server`` whose records are routed as they come (``default``: standing stream)."""
    conn: Connection = server.connect()
    conn.session.on_output = router(conn.session, default)
    return conn
