"""The HTTP transport's handshake-era sessions, behind one interface.

``HttpSession`` is one session (Streamable HTTP, or 2024-11-05 HTTP+SSE): its connection, its
standing stream, the POST streams still open, the principal it is bound to. ``SessionTable``
is where ``HttpTransport`` keeps them and the only way it reaches them: it looks a session up,
opens, ends and reaps sessions through it, and asks it what a request needs before it is served
(a session made by another process, the events a resumed stream replays). Two tables:

* ``LocalSessions``: this process only (the memory store): every answer is known at once;
* ``mcpfast.transports.shared_sessions.SharedSessions``: a shared store (Redis), so that several
  processes serve every session; its answers may wait for the store (futures, no task).

Both keep the sessions this process serves in ``sessions`` (the cache, for the shared one), so
the hot path (a request naming a session held here) is one dictionary look-up whatever the
table. A table answers with plain values and futures; the transport alone turns them into HTTP.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.transports.http_routing import Stream, connect

if TYPE_CHECKING:
    from mcpfast.core import HttpLane
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection
    from mcpfast.store.base import SessionStore
    from mcpfast.transports.event_store import EventStore

__all__ = ["HttpSession", "LocalSessions", "SessionTable", "chain", "wound_down"]

_INITIALIZED: Final = core.decode(b'{"jsonrpc":"2.0","method":"%s"}' % m.NOTIFICATION_INITIALIZED.encode())
STREAMS_KEPT: Final = 8
"""Open POST streams a session lists before it sweeps out the closed ones."""

T = TypeVar("T")
U = TypeVar("U")


class HttpSession:
    """One handshake-era (or 2024-11-05 SSE) session as the HTTP transport serves it.

    Attributes:
        id: the ``Mcp-Session-Id`` (or the 2024-11-05 ``session_id``).
        conn: the connection running its session machine.
        get: its standing stream (the GET stream; the ``/sse`` stream for 2024-11-05).
        streams: POST streams still open after their POST was answered or left.
        principal: the authenticated subject it is bound to (``None``: no authentication).
        legacy: a 2024-11-05 HTTP+SSE session.
        last_seen: ``time.monotonic()`` of its last request.
        next_stream: the number of its next POST stream (event ids start with it).
        version: the negotiated protocol version.
        pending: what its last input changed that other processes must learn, to be waited
            for before that input is answered (``None``: nothing; set by a shared table).
    """

    __slots__ = ("conn", "get", "id", "last_seen", "legacy", "next_stream", "pending", "principal", "streams", "version")

    def __init__(self, session_id: str, conn: Connection, get: Stream, principal: str | None, legacy: bool) -> None:
        self.id = session_id
        self.conn = conn
        self.get = get
        self.streams: list[Stream] | tuple[()] = ()  # a list from the first one: an idle session holds none
        self.principal = principal
        self.legacy = legacy
        self.last_seen = time.monotonic()
        self.next_stream = 1
        self.version: str | None = None
        self.pending: Awaitable[None] | None = None

    def keep_stream(self, stream: Stream) -> None:
        """List a POST stream that stays open after its POST (a resumed GET may find it)."""
        streams = self.streams
        if type(streams) is tuple:
            streams = self.streams = []
        elif len(streams) >= STREAMS_KEPT:
            streams[:] = [s for s in streams if not s.closed]
        streams.append(stream)  # type: ignore[union-attr]

    def stream_key(self) -> str:
        """The name of a new SSE stream of this session."""
        key = str(self.next_stream)
        self.next_stream += 1
        return key

    def find_stream(self, key: str) -> Stream | None:
        """The live stream named ``key`` (the GET stream or an open POST stream), if any."""
        if key == self.get.key:
            return self.get
        return next((s for s in self.streams if s.key == key and not s.closed), None)

    @property
    def busy(self) -> bool:
        """A reader is attached to one of its streams, or a request is still running."""
        return self.get.attached or self.conn.in_flight > 0 or any(s.attached and not s.closed for s in self.streams)

    def close_now(self) -> list[asyncio.Task[Any]]:
        """End the session's connection and streams; returns the handler tasks winding down."""
        try:
            return self.conn.close_now()
        finally:
            for stream in self.streams:
                stream.finish()
            self.streams = ()
            self.get.finish()


def chain(future: asyncio.Future[T], step: Callable[[asyncio.Future[T]], U | asyncio.Future[U]]) -> asyncio.Future[U]:
    """A future of ``step(future)`` once ``future`` is done, made in its done callback (no task).

    A ``step`` that returns a future is followed: the result is that future's. An exception
    ``step`` raises becomes the result's exception.
    """
    out: asyncio.Future[U] = future.get_loop().create_future()

    def follow(inner: asyncio.Future[U]) -> None:
        if out.done():
            return
        if inner.cancelled():
            out.cancel()
        elif inner.exception() is not None:
            out.set_exception(inner.exception())  # type: ignore[arg-type]
        else:
            out.set_result(inner.result())

    def done(source: asyncio.Future[T]) -> None:
        try:
            made = step(source)
        except Exception as exc:
            if not out.done():
                out.set_exception(exc)
            return
        if isinstance(made, asyncio.Future):
            made.add_done_callback(follow)
        elif not out.done():
            out.set_result(made)

    future.add_done_callback(done)
    return out


def wound_down(tasks: list[asyncio.Task[Any]]) -> asyncio.Future[None] | None:
    """A future done once every task has stopped, whatever its outcome (``None``: no task)."""
    if not tasks:
        return None
    return chain(asyncio.gather(*tasks, return_exceptions=True), _nothing)


def _nothing(_: asyncio.Future[Any]) -> None:
    return None


def _show(lane: HttpLane, sess: HttpSession) -> None:
    """Tell the lane of a session it may serve: Streamable HTTP, tools/call admitted directly
    (to its principal's tokens only)."""
    session = sess.conn.session
    if not sess.legacy and sess.version is not None and session.serves_directly(m.TOOLS_CALL):
        lane.add_session(sess.id, sess, session.requests_in_flight, sess.version, sess.principal)


class SessionTable(abc.ABC):
    """Where ``HttpTransport`` keeps its handshake-era sessions (see the module doc).

    What every table does is here: the sessions served by this process (``sessions``), looking
    them up, making a new one, installing and ending it here, reaping idle ones, and keeping
    the cancelled handler tasks referenced while they wind down. What depends on where sessions
    live is abstract: ``open``, ``load``, ``end``, ``follow`` and the 2024-11-05 steps.

    Args:
        server: the application (each session's connection is one of its).
        event_store: where SSE events are kept for ``Last-Event-ID`` (``None``: resumability off).
        max_sessions: sessions this process holds at most (``has_room``).
        idle_timeout: seconds without a request after which a session is ended.

    Attributes:
        sessions: the sessions this process serves, by id.
        event_store: the event store the transport uses (a shared table may put its own).
        store: the shared store behind the table (``None``: this process only).
    """

    store: SessionStore | None = None
    lane: HttpLane | None = None
    """The native server's lane (``core.HttpLane``), told of each Streamable HTTP session held
    here and of its end, so that it answers their sync tool calls (``attach``)."""

    def __init__(self, server: Server, *, event_store: EventStore | None, max_sessions: int, idle_timeout: float) -> None:
        self.server = server
        self.event_store = event_store
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.sessions: dict[str, HttpSession] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ what every table does

    def lookup(self, session_id: str, principal: str | None, *, legacy: bool = False) -> HttpSession | None:
        """The session ``session_id`` of ``principal`` held here (a 2024-11-05 one if ``legacy``),
        seen now; ``None`` when there is none of that kind for that principal."""
        sess = self.sessions.get(session_id)
        if sess is None:
            if self.lane is None or legacy:
                return None
            sess = self._take_over(session_id)
            if sess is None:
                return None
        if sess.legacy is not legacy or sess.principal != principal:
            return None
        sess.last_seen = time.monotonic()
        return sess

    def has_room(self) -> bool:
        """Whether this process may hold one more session (the lane's count too)."""
        held = len(self.sessions)
        if self.lane is not None:
            held += self.lane.born
        return held < self.max_sessions

    def bring_in(self) -> None:
        """Take over every session the lane opened (see ``_take_over``)."""
        lane = self.lane
        if lane is None or not lane.born:
            return
        for session_id in lane.born_ids(time.monotonic()):
            self._take_over(session_id)

    def _take_over(self, session_id: str) -> HttpSession | None:
        """Serve here a session the lane opened, if it did and the session is live: its
        ``initialize`` (and ``notifications/initialized``, if it came) replayed into a new
        session machine, whose reply was the lane's already."""
        lane = self.lane
        assert lane is not None
        taken = lane.take(session_id, time.monotonic())
        if taken is None:
            return None
        body, initialized, last_seen = taken
        sess = self.new_session(session_id, None)
        conn = sess.conn
        stream = Stream()
        conn.feed_message(core.decode(body), stream)
        stream.hand_over()
        if initialized:
            conn.feed_message(_INITIALIZED, Stream())
        version = conn.session.version
        if version is None:  # cannot be: the lane opened it with the full path's own reply
            self.discard(sess)
            return None
        sess.version = version
        sess.last_seen = last_seen
        self.install(sess)
        return sess

    def new_session(self, session_id: str, principal: str | None, *, legacy: bool = False) -> HttpSession:
        """A session not installed yet: its connection and its standing stream (untagged records go there)."""
        if legacy:
            get = Stream("0", keep=True)  # the /sse stream, read from the start
        else:
            get = Stream("0", keep=True, session_id=session_id, store=self.event_store)
            get.attached = False
            get.sse = True
        return HttpSession(session_id, connect(self.server, get), get, principal, legacy)

    def discard(self, sess: HttpSession) -> None:
        """Drop a session that was never installed (refused): its connection closes in the background."""
        self.finish(sess.conn.close_now())

    def install(self, sess: HttpSession) -> None:
        """Serve ``sess`` from this process from now on."""
        self.sessions[sess.id] = sess
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        if self.lane is not None:
            _show(self.lane, sess)

    def attach(self, lane: HttpLane) -> None:
        """Tell ``lane`` of the sessions held here, and of every one from now on (and of their end)."""
        self.lane = lane
        for sess in self.sessions.values():
            _show(lane, sess)

    def end_here(self, session_id: str) -> list[asyncio.Task[Any]]:
        """Stop serving a session in this process; returns its handler tasks winding down."""
        if self.lane is not None:
            self.lane.drop_session(session_id)
        sess = self.sessions.pop(session_id, None)
        if sess is None:
            return []
        try:
            return sess.close_now()
        finally:
            if self.event_store is not None:
                self.event_store.forget(session_id)

    def finish(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Let cancelled handler tasks wind down in the background (kept referenced until done)."""
        for task in tasks:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def end_and_wait(self, session_id: str) -> None:
        """``end_here``, then wait until its handlers have stopped."""
        tasks = self.end_here(session_id)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _reap(self) -> None:
        """End sessions idle longer than the timeout; stops when no session is left."""
        timeout = self.idle_timeout
        period = max(0.05, min(timeout / 4, 30.0))
        while self.sessions:
            await asyncio.sleep(period)
            now = time.monotonic()
            for sess in list(self.sessions.values()):
                if now - sess.last_seen < timeout:
                    continue
                if sess.legacy:
                    if sess.get.attached:  # its /sse stream is open: still in use
                        continue
                elif sess.busy:
                    continue
                await self.end_and_wait(sess.id)

    async def aclose(self) -> None:
        """End every session held here (server shutdown) and wait for what winds down."""
        for session_id in list(self.sessions):
            await self.end_and_wait(session_id)
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            await asyncio.gather(reaper, return_exceptions=True)  # ended, not left pending on a closing loop
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------ where sessions live

    @abc.abstractmethod
    def open(self, sess: HttpSession) -> asyncio.Future[bool] | None:
        """Make a session whose ``initialize`` the session machine accepted: ``None`` when it is served
        from now on; else a future resolved ``True`` once it is (kept where it must be first),
        ``False`` when the sessions are at their limit, or raising ``StoreUnavailable``. A
        session that is not kept is discarded by the table."""

    @abc.abstractmethod
    def load(self, session_id: str, principal: str | None, resume: str | None) -> Awaitable[None] | None:
        """What must happen before a request naming ``session_id`` (``resume``: its
        ``Last-Event-ID``) is served: ``None`` for nothing (the session is held here, or exists
        nowhere); else an awaitable after which it is held here if it exists (raises
        ``StoreUnavailable``)."""

    @abc.abstractmethod
    def end(self, sess: HttpSession) -> asyncio.Future[None] | None:
        """End a session everywhere (DELETE): ``None`` when done and nothing winds down; else a
        future done once its handlers here stopped (raising ``StoreUnavailable``: not ended)."""

    @abc.abstractmethod
    def follow(self, sess: HttpSession, key: str, last_event_id: str, replayed: list[tuple[str, bytes]]) -> Stream | None:
        """A resumed POST stream whose request runs in another process: a local stream that goes
        on with its events (``None``: nothing to follow, the replay is all)."""

    @abc.abstractmethod
    async def open_legacy(self, sess: HttpSession) -> None:
        """Serve a 2024-11-05 session whose ``/sse`` stream opened here (before its endpoint is sent)."""

    @abc.abstractmethod
    async def close_legacy(self, sess: HttpSession) -> None:
        """A 2024-11-05 session's ``/sse`` stream ended: so does the session."""

    @abc.abstractmethod
    def pass_on(self, session_id: str, principal: str | None, body: bytes) -> Awaitable[bool] | None:
        """A ``/messages`` POST for a 2024-11-05 session not held here: an awaitable of whether
        it reached the process holding it (raises ``StoreUnavailable``); ``None``: nowhere to pass it."""


class LocalSessions(SessionTable):
    """Sessions of this process only (the memory store): nothing waits, nothing is passed on."""

    def open(self, sess: HttpSession) -> None:
        self.install(sess)

    def load(self, session_id: str, principal: str | None, resume: str | None) -> None:
        return None

    def end(self, sess: HttpSession) -> asyncio.Future[None] | None:
        return wound_down(self.end_here(sess.id))

    def follow(self, sess: HttpSession, key: str, last_event_id: str, replayed: list[tuple[str, bytes]]) -> None:
        return None

    async def open_legacy(self, sess: HttpSession) -> None:
        self.install(sess)

    async def close_legacy(self, sess: HttpSession) -> None:
        await self.end_and_wait(sess.id)

    def pass_on(self, session_id: str, principal: str | None, body: bytes) -> None:
        return None
