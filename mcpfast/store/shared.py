"""Handshake-era sessions shared by several processes through a ``SessionStore``.

``SharedSessions`` is what ``HttpTransport`` consults when its store is shared (Redis). The
transport keeps serving from its own session table (the per-process cache); this module

* keeps a new session in the store before its ``initialize`` is answered (the global cap;
  503 with a JSON-RPC error body when the store cannot be reached);
* loads a session another process made the first time a request names it here, and rebuilds
  its engine session by replaying the handshake it stored (``initialize`` with the negotiated
  version, ``notifications/initialized``, the last ``logging/setLevel``) through the engine's
  public input, so no engine state is copied by hand;
* ends a session everywhere on DELETE (the store tells every process; 404 afterwards);
* pushes last-seen times to the store in one batch per ``flush_period`` (the idle expiry is
  the store's TTL) and drops cached sessions the store no longer has (expired, deleted while
  a message was lost, or a store restarted empty), so clients get 404 and re-initialize;
* keeps SSE events in the store's event store, so a stream resumes (``Last-Event-ID``) on any
  process: the events a GET resumes are fetched before the transport's sync replay reads them;
* passes a client's reply to a server-to-client request on to the process that sent it, and
  a notification for the session's GET stream to the process whose GET stream is open;
* passes a 2024-11-05 ``/messages`` POST on to the process holding that session's ``/sse``
  stream (the only place its answers can go out), which the store knows while it is open.

On the hot path (a request for a cached session) nothing here makes a round trip.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import orjson

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import INTERNAL_ERROR
from mcpfast.store.base import Message, SessionRecord, StoreUnavailable
from mcpfast.transports.answers import OK_EMPTY, Later, Reply, after, send_reply

if TYPE_CHECKING:
    from mcpfast.store.base import SessionStore

# The transport's types, loosely: this module is imported by mcpfast.transports.http and must
# not import it back (tests/test_import_cycles.py).
HttpTransport = Any
_Session = Any
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Deferred = Callable[[Receive, Send], Awaitable[None]]

__all__ = ["SharedSessions"]

logger = logging.getLogger("mcpfast.store")

REQUEST_ID_SPAN: Final = 1 << 32
"""Request ids to clients one process may use per session before reaching the next process's range."""
REQUEST_ID_RANGES: Final = 1 << 21
"""Ranges before they are reused (ids stay below 2**53: exact in a JavaScript client)."""

_JSON: Final = ((b"content-type", b"application/json"),)
_INITIALIZED: Final = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def _is_response(data: bytes) -> bool:
    """A JSON-RPC response (the answer that ends a POST stream)."""
    if b'"result"' not in data and b'"error"' not in data:
        return False
    try:
        decoded = core.decode(data)
    except core.JsonRpcError:
        return False
    return not isinstance(decoded, list) and decoded.kind in ("result", "error")


def _outcome(msg: Any) -> dict[str, Any]:
    """A decoded reply's ``result`` or ``error`` member."""
    return {"result": msg.result} if msg.kind == "result" else {"error": msg.error}


async def _all(changes: list[Awaitable[None]]) -> None:
    for change in changes:
        await change


def _unavailable(rid: Any = None, message: str = "session store unavailable, retry later") -> Reply:
    """503 with a JSON-RPC error body and ``Retry-After``."""
    return (503, [*_JSON, (b"retry-after", b"1")], core.encode_error(rid, INTERNAL_ERROR, message))


_FULL: Final[Reply] = _unavailable(message="server busy: too many sessions")


def _failed(future: asyncio.Future[Any]) -> bool:
    """The store could not be reached (a ``StoreUnavailable``; any other failure is logged too)."""
    if future.cancelled():
        return True
    exc = future.exception()
    if exc is not None and not isinstance(exc, StoreUnavailable):
        logger.error("session store failure", exc_info=exc)
    return exc is not None


class _ForwardingEvents:
    """The event store of a shared session's GET stream while no reader is attached here:
    each event is kept locally (``inner``) and offered to the process whose GET stream is open."""

    __slots__ = ("inner", "shared")

    def __init__(self, shared: SharedSessions, inner: Any) -> None:
        self.shared = shared
        self.inner = inner

    def append(self, session: str, stream: str, data: bytes) -> str:
        eid = self.inner.append(session, stream, data) if self.inner is not None else ""
        self.shared._spawn(self.shared.store.publish("get", session, f"{self.shared.origin}{eid} {data.decode()}"))
        return eid

    def replay(self, session: str, last_event_id: str) -> Any:
        return self.inner.replay(session, last_event_id) if self.inner is not None else None

    def forget(self, session: str) -> None:
        if self.inner is not None:
            self.inner.forget(session)


class SharedSessions:
    """The transport's side of a shared store (see the module doc).

    Attributes:
        store: the store.
        origin: this process's tag on the messages it sends (its own come back and are skipped).
        flush_period: seconds between two batched last-seen updates.
    """

    def __init__(self, transport: HttpTransport, store: SessionStore) -> None:
        self.transport = transport
        self.store = store
        self.origin = secrets.token_hex(6) + ":"
        self._stream_base = secrets.randbelow(1 << 40) * 1000 + 1
        self._request_base = -1
        """Where this process numbers its requests to clients (``REQUEST_ID_SPAN`` ids per process number)."""
        self.flush_period = max(0.05, min(transport.session_idle_timeout / 10, 2.0))
        self._levels: dict[str, str | None] = {}
        self._subs: dict[str, frozenset[str]] = {}
        self.flushes = 0
        """Batched last-seen updates sent (each one store round trip, whatever the traffic)."""
        self._looked_up: str | None = None
        self._loading: dict[str, asyncio.Future[SessionRecord | None]] = {}
        self._verify: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self.events = store.event_store(1000, transport.session_idle_timeout)
        """The shared SSE event store (``None``: the transport keeps its own, or resumability is off)."""
        if self.events is not None and transport.event_store is not None:
            transport.event_store = self.events
        else:
            self.events = None
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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._quiet(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _quiet(coro: Any) -> None:
        try:
            await coro
        except StoreUnavailable as exc:
            logger.warning("%s", exc)

    async def aclose(self) -> None:
        self._closing = True
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        await self._flush_once()  # the last-seen times of this process's sessions
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.store.aclose()

    # ------------------------------------------------------------ sessions

    def _cached(self, sess: _Session) -> None:
        """Install a session in this process's table, its GET stream offering events to others,
        its engine keeping the replies it cannot place (``forward_strays``)."""
        sess.conn.session.strays = []
        sess.get.store = _ForwardingEvents(self, self.transport.event_store)  # type: ignore[assignment]
        # POST streams are named by a counter per session; each process starts its own far
        # from the others', so stream names (and event ids) never meet in the shared store.
        sess.next_stream = self._stream_base
        # Requests to the client are numbered from this process's own range (its number from
        # the store), so a reply POSTed anywhere names the one request it answers.
        sess.conn.session.number_requests_from(self._request_base)
        self._levels[sess.id] = sess.conn.session.log_level
        if sess.conn.session.subscriptions:
            self._subs[sess.id] = frozenset(sess.conn.session.subscriptions)
        self.transport._install(sess)

    def initialize(self, sess: _Session, body: bytes) -> Later | Deferred:
        """Keep a new session in the store, then answer its ``initialize`` (503 when full or unreachable).

        A ``Later`` on the store's answer (no task per handshake), but for this process's very
        first session, which first asks the store for the process's number."""
        self._start()
        if self._request_base >= 0:
            return self._create(sess, body)

        async def numbered_first(receive: Receive, send: Send) -> None:
            try:
                await self._numbered()
            except StoreUnavailable:
                self.transport._finish(sess.conn.close_now())
                await send_reply(send, *_unavailable())
                return
            await self._create(sess, body)(receive, send)

        return numbered_first

    def _create(self, sess: _Session, body: bytes) -> Later:
        transport = self.transport
        engine = sess.conn.session
        record = SessionRecord(sess.id, engine.version or "", engine.client_capabilities, engine.client_info, sess.principal, time.time())

        def then(kept: asyncio.Future[bool]) -> Reply:
            failed = _failed(kept)
            if failed or not kept.result():
                transport._finish(sess.conn.close_now())
                return _unavailable() if failed else _FULL
            self._cached(sess)
            return (200, [(b"mcp-session-id", sess.id.encode()), *_JSON], body)

        return Later(asyncio.ensure_future(self.store.create(record, transport.max_sessions, transport.session_idle_timeout)), then)

    def prepare(self, method: str, headers: dict[bytes, bytes], body: bytes, principal: str | None) -> Deferred | None:
        """``None`` when the request needs nothing from the store (the hot path: a cached
        session; no round trip, nothing allocated but the id); else fetch what it needs (its
        session, the events a ``Last-Event-ID`` resumes), then serve it as the transport would."""
        raw = headers.get(b"mcp-session-id")
        if raw is None:
            return None
        session_id = raw.decode("latin-1")
        if session_id == self._looked_up:
            return None
        last = headers.get(b"last-event-id") if method == "GET" and self.events is not None else None
        if last is None and session_id in self.transport.sessions:
            return None
        then = functools.partial(self.transport._mcp, method, headers, body, principal)

        async def deferred(receive: Receive, send: Send) -> None:
            self._start()
            try:
                await self._numbered()
                if session_id not in self.transport.sessions:
                    record = await self._load(session_id)
                    if record is not None and record.principal == principal and session_id not in self.transport.sessions:
                        sess = self._rebuild(record)
                        if sess is not None:
                            self._cached(sess)
                if last is not None and self.events is not None and session_id in self.transport.sessions:
                    await self.events.prefetch(session_id, last.decode("latin-1"))
            except StoreUnavailable:
                await send_reply(send, *_unavailable())
                return
            self._looked_up = session_id  # then() comes back through prepare: do not look again
            try:
                outcome = then()  # served as if it had been here all along (404 if it was not found)
            finally:
                self._looked_up = None
            if type(outcome) is tuple:
                await send_reply(send, *outcome)
            else:
                await outcome(receive, send)

        return deferred

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

    def _rebuild(self, record: SessionRecord) -> _Session | None:
        """The engine session of ``record``: its handshake replayed through the engine's input."""
        init = core.decode(
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": m.INITIALIZE,
                    "params": {
                        "protocolVersion": record.version,
                        "capabilities": record.capabilities,
                        "clientInfo": record.client_info or {},
                    },
                }
            )
        )
        sess, _ = self.transport._open_session(record.id, init, record.principal)
        if sess is None or sess.version != record.version:
            if sess is not None:
                self.transport._finish(sess.conn.close_now())
            return None
        conn = sess.conn
        conn.feed(_INITIALIZED)
        if record.log_level is not None:
            conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": m.LOGGING_SET_LEVEL, "params": {"level": record.log_level}}))
        for uri in record.subscriptions:  # validated by the process that took the subscribe
            conn.session.subscribe(uri)
        conn.session.records_to_send()  # the replayed handshake's answers: nobody's to read
        return sess

    def delete(self, sess: _Session) -> Later:
        """DELETE: end the session in the store (with its SSE events), which tells every process,
        then here; answered once its handlers here wound down."""

        def then(deleted: asyncio.Future[bool]) -> Reply | Later:
            if _failed(deleted):
                return _unavailable()
            tasks = self._end_here(sess.id)
            if tasks:
                return after(asyncio.gather(*tasks, return_exceptions=True), OK_EMPTY)
            return OK_EMPTY

        return Later(asyncio.ensure_future(self.store.delete(sess.id)), then)

    def _end_here(self, session_id: str) -> list[asyncio.Task[Any]]:
        self._levels.pop(session_id, None)
        self._subs.pop(session_id, None)
        sess = self.transport.sessions.get(session_id)
        return self.transport._end_session_now(sess) if sess is not None else []

    def after_post(self, sess: _Session) -> Awaitable[None] | None:
        """A ``logging/setLevel`` or a ``resources/(un)subscribe`` served here goes to the store
        (and so to every process: a resource update noticed anywhere reaches the subscriber).
        The transport asks only when the engine's ``changes`` moved. Returns what to await
        before the request is answered (``None``: nothing changed), so once the client has its
        answer every process sees the change."""
        engine = sess.conn.session
        level = engine.log_level
        changes: list[Awaitable[None]] = []
        if level != self._levels.get(sess.id) and level is not None:
            self._levels[sess.id] = level
            changes.append(self.store.set_level(sess.id, level))
        subs = frozenset(engine.subscriptions)
        if subs != self._subs.get(sess.id, frozenset()):
            self._subs[sess.id] = subs
            changes.append(self.store.set_subscriptions(sess.id, sorted(subs)))
        if not changes:
            return None
        return changes[0] if len(changes) == 1 else _all(changes)

    def after_stored(self, stored: Awaitable[None], answer: Reply | Deferred) -> Deferred:
        """``answer`` once ``stored`` is done (a store that cannot be reached: answered anyway,
        the change then holds on this process only, and a warning says so)."""

        async def deferred(receive: Receive, send: Send) -> None:
            try:
                await stored
            except StoreUnavailable as exc:
                logger.warning("a session change is not shared: %s", exc)
            if type(answer) is tuple:
                await send_reply(send, *answer)
            else:
                await answer(receive, send)  # type: ignore[operator]

        return deferred

    def forward_strays(self, sess: _Session, body: bytes) -> None:
        """Pass on the replies the engine kept as not its own (``ServerSession.strays``): each
        answers a request another process sent, and goes to that process (the whole body when
        it was that one reply, each re-encoded when it came in a batch)."""
        engine = sess.conn.session
        strays, engine.strays = engine.strays, []
        if len(strays) == 1 and body.lstrip()[:1] != b"[":
            payloads = [body]
        else:
            payloads = [orjson.dumps({"jsonrpc": "2.0", "id": msg.id, **_outcome(msg)}) for msg in strays]
        for payload in payloads:
            self._spawn(self.store.publish("reply", sess.id, self.origin + payload.decode()))

    # ------------------------------------------------------------ 2024-11-05 HTTP+SSE

    async def legacy_opened(self, sess: _Session) -> None:
        """A 2024-11-05 ``/sse`` stream opened here: the store learns its session exists (and
        keeps learning it at each flush while the stream is open), so a ``/messages`` POST that
        lands on another process is passed on to this one, where the answers go out. Awaited
        before the client is told its endpoint, so no POST can arrive anywhere first."""
        self._start()
        try:
            await self.store.listening()  # a POST passed on before this process listens would be lost
            await self.store.keep_legacy([(sess.id, sess.principal)], self.transport.session_idle_timeout)
        except StoreUnavailable as exc:  # served here all the same; other processes learn it at a flush
            logger.warning("a 2024-11-05 session is not shared yet: %s", exc)

    def legacy_closed(self, session_id: str) -> None:
        if not self._closing:
            self._spawn(self.store.end_legacy(session_id))

    def legacy_post(self, session_id: str, principal: str | None, body: bytes, sent: Reply, not_found: Reply) -> Deferred:
        """A ``/messages`` POST for a 2024-11-05 session held by another process: passed on to
        it (the transport's ``sent`` once it was delivered; ``not_found`` when no process holds
        it for this principal, or the one that did is gone: its record is dropped then; 503
        without a store)."""

        async def deferred(receive: Receive, send: Send) -> None:
            self._start()
            try:
                found = await self.store.legacy_holder(session_id)
                delivered = False
                if found is not None and found[0] == principal:
                    payload = self.origin + body.decode("utf-8", "replace")
                    delivered = await self.store.send_to(found[1], "legacy", session_id, payload)
                    if not delivered:  # its process died with the stream: the session is over
                        await self.store.end_legacy(session_id)
            except StoreUnavailable:
                await send_reply(send, *_unavailable())
                return
            await send_reply(send, *(sent if delivered else not_found))

        return deferred

    # ------------------------------------------------------------ resumed streams

    def follow(self, sess: _Session, key: str, last_event_id: str, replayed: list[tuple[str, bytes]]) -> Any:
        """A POST stream resumed here while its request runs on another process: a local stream
        that goes on with the events that process keeps in the shared event store, each once,
        in order, until the request's answer (``None``: nothing to follow, the replay is all).

        The request's process keeps the events of a stream nobody reads there in the store as
        they come; this process reads the events after the last one it sent every
        ``follow_period`` seconds (one round trip) while the client is attached. A POST stream
        ends with its request's answer, so the first response ends this one too (a batch POST's
        later answers stay in the store for the next resumption).
        """
        if self.events is None or key == sess.get.key or any(_is_response(data) for _, data in replayed):
            return None
        from mcpfast.transports.http_routing import Stream

        live = Stream(key, session_id=sess.id)
        live.sse = True
        last = replayed[-1][0] if replayed else last_event_id
        self._spawn(self._follow(sess, live, last))
        return live

    follow_period = 0.05

    async def _follow(self, sess: _Session, live: Any, last: str) -> None:
        events = self.events
        assert events is not None
        while not live.closed:
            await asyncio.sleep(self.follow_period)
            if not live.attached or self.transport.sessions.get(sess.id) is not sess:
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
                if sid in self.transport.sessions:
                    self.transport._finish(self._end_here(sid))
            return
        sess = self.transport.sessions.get(session_id)
        if sess is None:
            return
        if kind == "lvl":
            self._levels[session_id] = payload
            sess.conn.session.log_level = payload
            return
        if kind == "subs":
            engine = sess.conn.session
            uris = frozenset(orjson.loads(payload) or ())
            self._subs[session_id] = uris
            for uri in set(engine.subscriptions) - uris:
                engine.unsubscribe(uri)
            for uri in uris - set(engine.subscriptions):
                engine.subscribe(uri)
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
        self._verify.update(self.transport.sessions)
        self._request_base = -1

    # ------------------------------------------------------------ last seen

    async def _flush_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.flush_period)
            await self._flush_once()
            if not self.transport.sessions and not self._verify:
                self._flusher = None
                return

    async def _flush_once(self) -> None:
        cutoff = time.monotonic() - self.flush_period * 1.5
        sessions = self.transport.sessions
        seen = [sid for sid, s in sessions.items() if not s.legacy and (s.last_seen >= cutoff or sid in self._verify)]
        legacy = [(sid, s.principal) for sid, s in sessions.items() if s.legacy and s.get.attached]
        for sid in [s for s in self._levels if s not in sessions]:
            del self._levels[sid]
        for sid in [s for s in self._subs if s not in sessions]:
            del self._subs[sid]
        if legacy:  # their /sse streams are open here: still held
            self.flushes += 1
            try:
                await self.store.keep_legacy(legacy, self.transport.session_idle_timeout)
            except StoreUnavailable:
                pass  # the next flush tries again
        if not seen:
            return
        self.flushes += 1
        try:
            gone = await self.store.refresh(seen, self.transport.session_idle_timeout)
        except StoreUnavailable:
            return  # kept for the next flush: the sessions stay cached meanwhile
        self._verify.difference_update(seen)
        for sid in gone:  # expired, deleted, or the store restarted empty
            self.transport._finish(self._end_here(sid))
