"""``SharedSessions``: the ``SessionTable`` of handshake-era sessions kept in a shared ``SessionStore``.

With a shared store (Redis) every process serves every session. This table keeps serving from
its own ``sessions`` (the per-process cache) and

* keeps a new session in the store before its ``initialize`` is answered (the global cap;
  the transport answers 503 when the store cannot be reached);
* loads a session another process made the first time a request names it here, and rebuilds
  its session machine from the stored record with the session machine's ``restore``;
* ends a session everywhere on DELETE (the store tells every process; 404 afterwards);
* pushes last-seen times to the store in one batch per ``flush_period`` (the idle expiry is
  the store's TTL) and drops cached sessions the store no longer has (expired, deleted while
  a message was lost, or a store restarted empty), so clients get 404 and re-initialize;
* keeps SSE events in the store's event store, so a stream resumes (``Last-Event-ID``) on any
  process: the events a GET resumes are fetched before the transport's sync replay reads them;
* writes what a session's input changed that every process must see (``on_change``: the log
  level, the subscriptions) before that input is answered (``HttpSession.pending``);
* passes a client's reply to a server-to-client request on to the process that sent it
  (``on_stray``), and a notification for the session's GET stream to the process whose GET
  stream is open;
* passes a 2024-11-05 ``/messages`` POST on to the process holding that session's ``/sse``
  stream (the only place its answers can go out), which the store knows while it is open.

On the hot path (a request for a cached session) nothing here runs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, Final

import orjson

from mcpfast import core
from mcpfast.sansio import SessionState
from mcpfast.store.base import Message, SessionRecord, SharedEvents, StoreUnavailable
from mcpfast.transports.event_store import WritesBehind
from mcpfast.transports.http_routing import Stream
from mcpfast.transports.sessions import HttpSession, SessionTable, chain, wound_down

if TYPE_CHECKING:
    from mcpfast.server.app import Server
    from mcpfast.store.base import SessionStore
    from mcpfast.transports.event_store import EventStore

__all__ = ["SharedSessions"]

logger = logging.getLogger("mcpfast.store")

REQUEST_ID_SPAN: Final = 1 << 32
"""Request ids to clients one process may use per session before reaching the next process's range."""
REQUEST_ID_RANGES: Final = 1 << 21
"""Ranges before they are reused (ids stay below 2**53: exact in a JavaScript client)."""
EVENTS_KEPT: Final = 1000
"""SSE events the shared event store keeps per stream."""


def _is_response(data: bytes) -> bool:
    """A JSON-RPC response (the answer that ends a POST stream)."""
    if b'"result"' not in data and b'"error"' not in data:
        return False
    try:
        decoded = core.decode(data)
    except core.JsonRpcError:
        return False
    return not isinstance(decoded, list) and decoded.kind in ("result", "error")


def _failure(future: asyncio.Future[Any]) -> StoreUnavailable | None:
    """Why a store operation did not complete (``None``: it did). Every failure is the store's
    being unreachable to the transport; one that is not a ``StoreUnavailable`` is logged too."""
    if future.cancelled():
        return StoreUnavailable("session store request cancelled")
    exc = future.exception()
    if exc is None or isinstance(exc, StoreUnavailable):
        return exc
    logger.error("session store failure", exc_info=exc)
    return StoreUnavailable(f"session store failure: {exc!r}")


class _ForwardingEvents:
    """The event store of a shared session's GET stream while no reader is attached here:
    each event is kept locally (``inner``) and offered to the process whose GET stream is open."""

    __slots__ = ("inner", "shared")

    def __init__(self, shared: SharedSessions, inner: EventStore | None) -> None:
        self.shared = shared
        self.inner = inner

    def append(self, session: str, stream: str, data: bytes) -> str:
        eid = self.inner.append(session, stream, data) if self.inner is not None else ""
        self.shared._spawn(self._offer(session, f"{self.shared.origin}{eid} {data.decode()}"))
        return eid

    async def _offer(self, session: str, text: str) -> None:
        # offered once kept: the process that sends it on must not give its client an id the
        # store has not got
        if isinstance(self.inner, WritesBehind) and (landed := self.inner.landed()) is not None:
            await landed
        await self.shared.store.publish("get", session, text)

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        return self.inner.replay(session, last_event_id) if self.inner is not None else None

    def forget(self, session: str) -> None:
        if self.inner is not None:
            self.inner.forget(session)


class SharedSessions(SessionTable):
    """The sessions of a shared store (see the module doc).

    Attributes:
        store: the store.
        origin: this process's tag on the messages it sends (its own come back and are skipped).
        flush_period: seconds between two batched last-seen updates.
        flushes: batched last-seen updates sent (each one store round trip, whatever the traffic).
        events: the shared SSE event store (``None``: the transport keeps its own, or resumability is off).
    """

    follow_period = 0.05
    """Seconds between two reads of a followed stream's new events."""

    def __init__(
        self, server: Server, store: SessionStore, *, event_store: EventStore | None, max_sessions: int, idle_timeout: float
    ) -> None:
        super().__init__(server, event_store=event_store, max_sessions=max_sessions, idle_timeout=idle_timeout)
        self.store: SessionStore = store
        self.origin = secrets.token_hex(6) + ":"
        self._stream_base = secrets.randbelow(1 << 40) * 1000 + 1
        self._request_base = -1
        """Where this process numbers its requests to clients (``REQUEST_ID_SPAN`` ids per process number)."""
        self.flush_period = max(0.05, min(idle_timeout / 10, 2.0))
        self._known: dict[str, SessionState] = {}
        """Each cached session's state as the store holds it (what a change is compared with)."""
        self.flushes = 0
        self._loading: dict[str, asyncio.Future[SessionRecord | None]] = {}
        self._verify: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        events = store.event_store(EVENTS_KEPT, idle_timeout)
        self.events: SharedEvents | None = events if events is not None and event_store is not None else None
        if self.events is not None:
            self.event_store = self.events
        self._started = False
        self._closing = False

    # ------------------------------------------------------------ plumbing

    async def _numbered(self) -> None:
        """This process's request-id range, from the store the first time (raises ``StoreUnavailable``)."""
        if self._request_base < 0:
            number = await self.store.process_number()
            self._request_base = (number % REQUEST_ID_RANGES) * REQUEST_ID_SPAN

    def _start(self) -> None:
        if not self._started:
            self._started = True
            self.store.subscribe(self._on_message, self._on_reconnect)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.finish([asyncio.get_running_loop().create_task(self._quiet(coro))])

    @staticmethod
    async def _quiet(coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except StoreUnavailable as exc:
            logger.warning("%s", exc)

    async def aclose(self) -> None:
        """Stop sharing: the last-seen times go out, the sessions stay in the store for the other processes."""
        self._closing = True
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        await self._flush_once()
        await super().aclose()
        await self.store.aclose()

    # ------------------------------------------------------------ sessions

    def _share(self, sess: HttpSession) -> None:
        """Serve a session kept in the store from this process: its session machine numbers its requests
        from this process's range and reports what the others must learn, its GET stream offers
        its events to the others."""
        machine = sess.conn.session
        machine.share(
            first_request_id=self._request_base,
            on_change=functools.partial(self._changed, sess),
            on_stray=functools.partial(self._stray, sess),
        )
        sess.get.store = _ForwardingEvents(self, self.event_store)
        # POST streams are named by a counter per session; each process starts its own far
        # from the others', so stream names (and event ids) never meet in the shared store.
        sess.next_stream = self._stream_base
        self._known[sess.id] = machine.snapshot()
        self.install(sess)

    def open(self, sess: HttpSession) -> asyncio.Future[bool]:
        """Keep the session in the store first (the store's global cap). A future on the store's
        answer (no task per handshake), but for this process's very first session, which first
        asks the store for the process's number."""
        self._start()
        if self._request_base >= 0:
            return self._create(sess)
        return asyncio.ensure_future(self._numbered_then_create(sess))

    async def _numbered_then_create(self, sess: HttpSession) -> bool:
        try:
            await self._numbered()
        except StoreUnavailable:
            self.discard(sess)
            raise
        return await self._create(sess)

    def _create(self, sess: HttpSession) -> asyncio.Future[bool]:
        state = sess.conn.session.snapshot()
        record = SessionRecord(sess.id, state.version, state.client_capabilities, state.client_info, sess.principal, time.time())
        created = asyncio.ensure_future(self.store.create(record, self.max_sessions, self.idle_timeout))
        return chain(created, functools.partial(self._created, sess))

    def _created(self, sess: HttpSession, kept: asyncio.Future[bool]) -> bool:
        failure = _failure(kept)
        if failure is not None or not kept.result():
            self.discard(sess)
            if failure is not None:
                raise failure
            return False
        self._share(sess)
        return True

    def load(self, session_id: str, principal: str | None, resume: str | None) -> Awaitable[None] | None:
        if resume is None or self.events is None:
            if session_id in self.sessions:
                return None
            resume = None
        return self._fetch(session_id, principal, resume)

    async def _fetch(self, session_id: str, principal: str | None, resume: str | None) -> None:
        self._start()
        await self._numbered()
        if session_id not in self.sessions:
            record = await self._load(session_id)
            if record is not None and record.principal == principal and session_id not in self.sessions:
                sess = self._rebuild(record)
                if sess is not None:
                    self._share(sess)
        if resume is not None and self.events is not None and session_id in self.sessions:
            await self.events.prefetch(session_id, resume)

    async def _load(self, session_id: str) -> SessionRecord | None:
        """One round trip however many requests for the same session arrive meanwhile."""
        pending = self._loading.get(session_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[SessionRecord | None] = asyncio.get_running_loop().create_future()
        self._loading[session_id] = future
        try:
            record = await self.store.load(session_id)
        except StoreUnavailable as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: only the waiters care
            raise
        else:
            future.set_result(record)
            return record
        finally:
            del self._loading[session_id]

    def _rebuild(self, record: SessionRecord) -> HttpSession | None:
        """The session of ``record``, its session machine restored from it (``None``: a version not served here)."""
        sess = self.new_session(record.id, record.principal)
        state = SessionState(record.version, record.capabilities, record.client_info, record.log_level, frozenset(record.subscriptions))
        try:
            sess.conn.session.restore(state)
        except ValueError:
            self.discard(sess)
            return None
        sess.version = record.version
        return sess

    def end(self, sess: HttpSession) -> asyncio.Future[None]:
        """End the session in the store (with its SSE events), which tells every process, then here."""
        return chain(asyncio.ensure_future(self.store.delete(sess.id)), functools.partial(self._deleted, sess.id))

    def _deleted(self, session_id: str, deleted: asyncio.Future[bool]) -> asyncio.Future[None] | None:
        failure = _failure(deleted)
        if failure is not None:
            raise failure
        return wound_down(self.end_here(session_id))

    def end_here(self, session_id: str) -> list[asyncio.Task[Any]]:
        self._known.pop(session_id, None)
        return super().end_here(session_id)

    def _changed(self, sess: HttpSession) -> None:
        """The session machine's ``on_change``: a ``logging/setLevel`` or a ``resources/(un)subscribe``
        served here goes to the store (and so to every process: a resource update noticed
        anywhere reaches the subscriber) before the input is answered (``sess.pending``)."""
        state = sess.conn.session.snapshot()
        known = self._known.get(sess.id)
        if known is None:  # not shared (any more): nothing to tell
            return
        writes: list[Awaitable[None]] = []
        if state.log_level != known.log_level and state.log_level is not None:
            writes.append(self.store.set_level(sess.id, state.log_level))
        if state.subscriptions != known.subscriptions:
            writes.append(self.store.set_subscriptions(sess.id, sorted(state.subscriptions)))
        self._known[sess.id] = state
        if writes:
            task = asyncio.get_running_loop().create_task(self._stored(sess.pending, writes))
            self.finish([task])
            sess.pending = task

    @staticmethod
    async def _stored(before: Awaitable[None] | None, writes: list[Awaitable[None]]) -> None:
        """The writes of one change, after those of the previous one (a store that cannot be
        reached: the change then holds in this process only, and a warning says so)."""
        if before is not None:
            await before
        try:
            for write in writes:
                await write
        except StoreUnavailable as exc:
            logger.warning("a session change is not shared: %s", exc)

    def _stray(self, sess: HttpSession, msg: Any) -> None:
        """The session machine's ``on_stray``: a reply to a request another process sent goes to that process."""
        outcome = {"result": msg.result} if msg.kind == "result" else {"error": msg.error}
        payload = orjson.dumps({"jsonrpc": "2.0", "id": msg.id, **outcome})
        self._spawn(self.store.publish("reply", sess.id, self.origin + payload.decode()))

    def _adopt(self, sess: HttpSession, state: SessionState) -> None:
        """A change another process made to a cached session."""
        sess.conn.session.restore(state)
        self._known[sess.id] = state

    # ------------------------------------------------------------ 2024-11-05 HTTP+SSE

    async def open_legacy(self, sess: HttpSession) -> None:
        """The store learns the session exists (and keeps learning it at each flush while the
        stream is open), so a ``/messages`` POST that lands on another process is passed on to
        this one, where the answers go out. Awaited before the client is told its endpoint, so
        no POST can arrive anywhere first."""
        self.install(sess)
        self._start()
        try:
            await self.store.listening()  # a POST passed on before this process listens would be lost
            await self.store.keep_legacy([(sess.id, sess.principal)], self.idle_timeout)
        except StoreUnavailable as exc:  # served here all the same; other processes learn it at a flush
            logger.warning("a 2024-11-05 session is not shared yet: %s", exc)

    async def close_legacy(self, sess: HttpSession) -> None:
        await self.end_and_wait(sess.id)
        if not self._closing:
            self._spawn(self.store.end_legacy(sess.id))

    def pass_on(self, session_id: str, principal: str | None, body: bytes) -> Awaitable[bool]:
        """Passed on to the process holding the session for this principal (``False``: none
        does, or the one that did is gone: its record is dropped then)."""
        return self._pass_on(session_id, principal, body)

    async def _pass_on(self, session_id: str, principal: str | None, body: bytes) -> bool:
        self._start()
        found = await self.store.legacy_holder(session_id)
        if found is None or found[0] != principal:
            return False
        delivered = await self.store.send_to(found[1], "legacy", session_id, self.origin + body.decode("utf-8", "replace"))
        if not delivered:  # its process died with the stream: the session is over
            await self.store.end_legacy(session_id)
        return delivered

    # ------------------------------------------------------------ resumed streams

    def follow(self, sess: HttpSession, key: str, last_event_id: str, replayed: list[tuple[str, bytes]]) -> Stream | None:
        """The request's process keeps the events of a stream nobody reads there in the store as
        they come; this process reads the events after the last one it sent every
        ``follow_period`` seconds (one round trip) while the client is attached. A POST stream
        ends with its request's answer, so the first response ends this one too (a batch POST's
        later answers stay in the store for the next resumption)."""
        if self.events is None or key == sess.get.key or any(_is_response(data) for _, data in replayed):
            return None
        live = Stream(key, session_id=sess.id)
        live.sse = True
        last = replayed[-1][0] if replayed else last_event_id
        self._spawn(self._follow(sess, live, last))
        return live

    async def _follow(self, sess: HttpSession, live: Stream, last: str) -> None:
        events = self.events
        assert events is not None
        while not live.closed:
            await asyncio.sleep(self.follow_period)
            if not live.attached or self.sessions.get(sess.id) is not sess:
                live.finish()  # the client went away, or the session ended
                return
            try:
                found = await events.after(sess.id, live.key, last)
            except StoreUnavailable:
                continue  # the next period tries again; the events stay kept
            if found is None:  # trimmed past what was sent: the client resumes again (404 then)
                live.finish()
                return
            for eid, data in found:
                last = eid
                if not data:
                    continue
                events.forwarded(data, eid)  # sent under the id it is kept as, not kept again
                live.push(data)
                if _is_response(data):
                    live.finish()
                    return

    # ------------------------------------------------------------ messages

    def _on_message(self, message: Message) -> None:
        kind, session_id, payload = message
        if kind == "del":  # one message may end several sessions (space-separated ids)
            for sid in session_id.split(" "):
                if sid in self.sessions:
                    self.finish(self.end_here(sid))
            return
        sess = self.sessions.get(session_id)
        if sess is None:
            return
        if kind == "lvl":
            self._adopt(sess, sess.conn.session.snapshot()._replace(log_level=payload))
            return
        if kind == "subs":
            self._adopt(sess, sess.conn.session.snapshot()._replace(subscriptions=frozenset(orjson.loads(payload) or ())))
            return
        origin, _, data = payload.partition(":")
        if origin + ":" == self.origin:
            return
        if kind == "legacy":
            if sess.legacy:  # a POST another process took for this session's /sse stream here
                sess.last_seen = time.monotonic()
                try:
                    sess.conn.feed(data.encode())
                except Exception:
                    logger.exception("unexpected failure handling a passed-on POST")
            return
        if kind == "reply":
            raw = data.encode()
            decoded = core.decode(raw)
            if not isinstance(decoded, list) and decoded.id in sess.conn.session.pending_requests():
                sess.conn.feed(raw)
        elif kind == "get" and sess.get.attached:
            eid, _, text = data.partition(" ")
            raw = text.encode()
            if self.events is not None:
                self.events.forwarded(raw, eid)  # kept already, under that id: sent here, not kept twice
            sess.get.push(raw)

    def _on_reconnect(self) -> None:
        """Messages may have been lost (a DELETE among them): check every cached session at the next
        flush. The store may have restarted empty (its process counter too): number again."""
        self._verify.update(self.sessions)
        self._request_base = -1

    # ------------------------------------------------------------ last seen

    async def _flush_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.flush_period)
            await self._flush_once()
            if not self.sessions and not self._verify:
                self._flusher = None
                return

    async def _flush_once(self) -> None:
        cutoff = time.monotonic() - self.flush_period * 1.5
        sessions = self.sessions
        seen = [sid for sid, s in sessions.items() if not s.legacy and (s.last_seen >= cutoff or sid in self._verify)]
        legacy = [(sid, s.principal) for sid, s in sessions.items() if s.legacy and s.get.attached]
        for sid in [s for s in self._known if s not in sessions]:
            del self._known[sid]
        if legacy:  # their /sse streams are open here: still held
            self.flushes += 1
            try:
                await self.store.keep_legacy(legacy, self.idle_timeout)
            except StoreUnavailable:
                pass  # the next flush tries again
        if not seen:
            return
        self.flushes += 1
        try:
            gone = await self.store.refresh(seen, self.idle_timeout)
        except StoreUnavailable:
            return  # kept for the next flush: the sessions stay cached meanwhile
        self._verify.difference_update(seen)
        for sid in gone:  # expired, deleted, or the store restarted empty
            self.finish(self.end_here(sid))
