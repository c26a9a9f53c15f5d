"""``RedisStore``: sessions shared by every process that names the same Redis database.

Keys (``prefix`` defaults to ``mcpfast:``):

* ``<prefix>s:<id>``: a session's ``SessionRecord`` (JSON); its Redis TTL is the idle expiry.
* ``<prefix>live``: a sorted set of session ids scored by last-seen time (the global cap
  counts it; members idle past the timeout are dropped when a session is created).
* ``<prefix>secret``: the key that seals 2026 ``requestState`` (made once, by the first process).
* channel ``<prefix>bus``: messages between processes (``SessionStore.publish``).

Uses redis-py's asyncio client (hiredis parses replies when installed). ``create`` is one
script (cap check + insert, atomic), ``delete`` four commands (record, cap, SSE events,
publish); the ``create`` and ``delete`` calls made in one event-loop turn share one pipeline
(one round trip for many concurrent handshakes); ``refresh`` is one pipeline for any number
of sessions.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Final

import orjson

from mcpfast.store.base import Message, SessionRecord, StoreUnavailable

try:
    import redis
    import redis.asyncio as aredis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - the extra is part of `make install`
    raise ImportError("--store redis://… needs redis-py: pip install 'mcpfast[redis]'") from exc

__all__ = ["RedisEvents", "RedisStore"]

logger = logging.getLogger("mcpfast.store")

_CREATE: Final = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
return 1
"""
"""Drop members idle past the timeout, refuse when the cap is reached, else insert."""

_SET_LEVEL: Final = """
local rec = redis.call('GET', KEYS[1])
if not rec then return 0 end
local d = cjson.decode(rec)
d['l'] = ARGV[1]
redis.call('SET', KEYS[1], cjson.encode(d), 'KEEPTTL')
return 1
"""


class RedisStore:
    """A ``SessionStore`` in Redis (``url``: ``redis://HOST:PORT/DB``).

    Args:
        url: the database.
        prefix: the start of every key and channel (several servers may share one database).
        timeout: seconds a round trip may take before the store counts as unavailable.
    """

    shared = True

    def __init__(self, url: str, *, prefix: str = "mcpfast:", timeout: float = 1.0) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.ops = 0
        self.errors = 0
        self._live = f"{prefix}live"
        self._channel = f"{prefix}bus"
        self._client: aredis.Redis | None = None
        self._set_level: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._callbacks: list[tuple[Callable[[Message], None], Callable[[], None]]] = []
        self._secret: bytes | None = None
        self._queue: list[tuple[Callable[[Any], None], int, asyncio.Future[list[Any]]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}s:{session_id}"

    def events_index(self, session_id: str) -> str:
        """The set naming a session's SSE event lists (``RedisEvents``), deleted with it."""
        return f"{self.prefix}evs:{session_id}"

    @property
    def client(self) -> aredis.Redis:
        client = self._client
        if client is None:
            client = self._client = aredis.Redis.from_url(
                self.url,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0),
                health_check_interval=0,
            )
            self._set_level = client.register_script(_SET_LEVEL)
        return client

    async def _call(self, what: Callable[[], Any]) -> Any:
        self.ops += 1
        try:
            return await asyncio.wait_for(what(), self.timeout * 2)
        except (redis.RedisError, OSError, TimeoutError) as exc:
            self.errors += 1
            raise StoreUnavailable(f"session store unavailable: {exc.__class__.__name__}") from exc

    async def _batched(self, add: Callable[[Any], None], count: int) -> list[Any]:
        """Queue ``count`` commands (``add(pipeline)``); every command queued in one event-loop turn
        goes out in one pipeline, so concurrent handshakes share their round trips."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queue.append((add, count, future))
        if len(self._queue) == 1:
            asyncio.get_running_loop().call_soon(self._send_batch)
        return await future

    def _send_batch(self) -> None:
        batch, self._queue = self._queue, []

        async def run() -> Any:
            async with self.client.pipeline(transaction=False) as pipe:
                for add, _, _ in batch:
                    add(pipe)
                return await pipe.execute(raise_on_error=False)

        async def deliver() -> None:
            try:
                results = await self._call(run)
            except StoreUnavailable as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
            at = 0
            for _, count, future in batch:
                part, at = results[at : at + count], at + count
                failed = next((r for r in part if isinstance(r, Exception)), None)
                if future.done():
                    continue
                if failed is not None:
                    self.errors += 1
                    future.set_exception(StoreUnavailable(f"session store: {failed}"))
                else:
                    future.set_result(part)

        task = asyncio.get_running_loop().create_task(deliver())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def create(self, record: SessionRecord, max_sessions: int, ttl: float) -> bool:
        now = time.time()
        keys_args = (
            self._live, self._key(record.id),
            now - ttl, max_sessions, now, record.id, record.encode(), max(1, int(ttl * 1000)),
        )  # fmt: skip
        (done,) = await self._batched(lambda pipe: pipe.eval(_CREATE, 2, *keys_args), 1)
        return bool(done)

    async def load(self, session_id: str) -> SessionRecord | None:
        data = await self._call(lambda: self.client.get(self._key(session_id)))
        return None if data is None else SessionRecord.decode(session_id, data)

    async def delete(self, session_id: str) -> bool:
        def add(pipe: Any) -> None:
            pipe.delete(self._key(session_id))
            pipe.zrem(self._live, session_id)
            pipe.eval(_DELETE_EVENTS, 1, self.events_index(session_id))  # its SSE events (RedisEvents)
            pipe.publish(self._channel, orjson.dumps(("del", session_id, "")))

        results = await self._batched(add, 4)
        return bool(results[0])

    async def set_level(self, session_id: str, level: str) -> None:
        client = self.client

        async def run() -> Any:
            await self._set_level(keys=[self._key(session_id)], args=[level], client=client)
            return await client.publish(self._channel, orjson.dumps(("lvl", session_id, level)))

        await self._call(run)

    async def refresh(self, session_ids: list[str], ttl: float) -> list[str]:
        if not session_ids:
            return []
        now = time.time()
        ms = max(1, int(ttl * 1000))

        async def run() -> Any:
            async with self.client.pipeline(transaction=False) as pipe:
                for sid in session_ids:
                    pipe.pexpire(self._key(sid), ms)
                pipe.zadd(self._live, {sid: now for sid in session_ids}, xx=True)
                return await pipe.execute()

        results = await self._call(run)
        return [sid for sid, alive in zip(session_ids, results, strict=False) if not alive]

    async def publish(self, kind: str, session_id: str, payload: str = "") -> None:
        await self._call(lambda: self.client.publish(self._channel, orjson.dumps((kind, session_id, payload))))

    def subscribe(self, callback: Callable[[Message], None], on_reconnect: Callable[[], None]) -> None:
        self._callbacks.append((callback, on_reconnect))
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        """Deliver bus messages; after a lost connection, resubscribe and say so (messages may be lost)."""
        lost = False
        while True:
            client = aredis.Redis.from_url(self.url, socket_connect_timeout=self.timeout, health_check_interval=5)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                if lost:
                    lost = False
                    for _, on_reconnect in self._callbacks:
                        on_reconnect()
                while True:
                    message = await pubsub.get_message(timeout=5.0)
                    if message is None or message.get("type") != "message":
                        if message is None:
                            await pubsub.ping()  # notices a dead connection within the timeout
                        continue
                    try:
                        kind, sid, payload = orjson.loads(message["data"])
                    except (orjson.JSONDecodeError, ValueError, TypeError):
                        continue
                    for callback, _ in self._callbacks:
                        try:
                            callback((kind, sid, payload))
                        except Exception:
                            logger.exception("session-store message %s failed", kind)
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError, TimeoutError):
                lost = True
                await asyncio.sleep(0.2)
            finally:
                try:
                    await pubsub.aclose()
                    await client.aclose()
                except Exception:  # noqa: S110 - closing a dead connection
                    pass

    def event_store(self, max_events: int, ttl: float) -> RedisEvents:
        """Where this store keeps SSE events, so a stream resumes on any process."""
        return RedisEvents(self, max_events=max_events, ttl=ttl)

    def shared_secret(self) -> bytes | None:
        """The sealing key every process shares: made by the first one (``SET NX``), read by all.

        Called once at start-up, before serving (a blocking round trip).
        """
        if self._secret is None:
            key = f"{self.prefix}secret"
            sync = redis.Redis.from_url(self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout)
            try:
                sync.set(key, secrets.token_hex(32), nx=True)
                value = sync.get(key)
            except redis.RedisError as exc:
                raise StoreUnavailable(f"session store unavailable at start-up: {exc}") from exc
            finally:
                sync.close()
            if not isinstance(value, bytes):
                raise StoreUnavailable(f"session store: {key} holds no key")
            self._secret = bytes.fromhex(value.decode())
        return self._secret

    async def aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


_DELETE_EVENTS: Final = """
local streams = redis.call('SMEMBERS', KEYS[1])
for _, key in ipairs(streams) do redis.call('DEL', key) end
redis.call('DEL', KEYS[1])
return #streams
"""


class RedisEvents:
    """An ``EventStore`` (``mcpfast.transports.event_store``) in Redis, for resuming on any process.

    Each stream of a session is a list ``<prefix>ev:<session>:<stream>`` of ``<id> <data>``
    entries, at most ``max_events`` long (the oldest dropped), expiring ``ttl`` seconds after
    its last event. An event id is ``<stream>-<origin><seq>``: unique across processes, so a
    stream several processes write (the GET stream) keeps one order, Redis's.

    ``append`` is synchronous (the transport's contract): it names the event at once and
    queues the write; the queue goes out in one pipeline per event-loop turn. ``replay`` reads
    what ``prefetch`` fetched (the transport's GET with ``Last-Event-ID`` is sync too), so the
    shared-session layer prefetches before the transport looks.
    """

    def __init__(self, store: RedisStore, *, max_events: int = 1000, ttl: float = 600.0) -> None:
        self.store = store
        self.max_events = max_events
        self.ttl = ttl
        self.origin = secrets.token_hex(4) + "."
        self._seq = 0
        self._queue: list[tuple[str, str, bytes]] = []
        self._flushing = False
        self._fetched: dict[tuple[str, str], tuple[str, list[tuple[str, bytes]]] | None] = {}
        self._forwarded: dict[int, tuple[bytes, str]] = {}

    def _list(self, session: str, stream: str) -> str:
        return f"{self.store.prefix}ev:{session}:{stream}"

    def append(self, session: str, stream: str, data: bytes) -> str:
        known = self._forwarded.pop(id(data), None)
        if known is not None and known[0] is data:
            return known[1]  # kept by the process that made it: sent here under its id
        self._seq += 1
        eid = f"{stream}-{self.origin}{self._seq}"
        self._queue.append((self._list(session, stream), session, eid.encode() + b" " + data))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return eid

    def forwarded(self, data: bytes, eid: str) -> None:
        """``data`` came from another process, already kept as ``eid``: ``append`` must not keep it again."""
        if len(self._forwarded) > 4096:
            self._forwarded.clear()
        self._forwarded[id(data)] = (data, eid)

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                ms = max(1, int(self.ttl * 1000))

                async def run(batch: list[tuple[str, str, bytes]] = batch, ms: int = ms) -> Any:
                    async with self.store.client.pipeline(transaction=False) as pipe:
                        for key, session, entry in batch:
                            pipe.rpush(key, entry)
                            pipe.ltrim(key, -self.max_events, -1)
                            pipe.pexpire(key, ms)
                            pipe.sadd(self.store.events_index(session), key)
                            pipe.pexpire(self.store.events_index(session), ms)
                        return await pipe.execute()

                try:
                    await self.store._call(run)
                except StoreUnavailable as exc:
                    logger.warning("%d SSE events not kept: %s", len(batch), exc)
        finally:
            self._flushing = False

    async def prefetch(self, session: str, last_event_id: str) -> None:
        """Fetch what ``replay(session, last_event_id)`` will return (raises ``StoreUnavailable``)."""
        stream, sep, _ = last_event_id.rpartition("-")
        found: tuple[str, list[tuple[str, bytes]]] | None = None
        if sep:
            entries = await self.store._call(lambda: self.store.client.lrange(self._list(session, stream), 0, -1))
            events = [(e[:i].decode(), e[i + 1 :]) for e in entries if (i := e.find(b" ")) > 0]
            ids = [eid for eid, _ in events]
            if last_event_id in ids:
                found = (stream, events[ids.index(last_event_id) + 1 :])
            else:
                at = _after_lost(ids, last_event_id)
                if at is not None:
                    found = (stream, events[at:])
        self._fetched[(session, last_event_id)] = found
        if len(self._fetched) > 1024:
            self._fetched.pop(next(iter(self._fetched)))

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        return self._fetched.pop((session, last_event_id), None)

    def forget(self, session: str) -> None:
        """Nothing: a process dropping its copy of a session does not end it (``RedisStore.delete`` does)."""


def _split(eid: str) -> tuple[str, int] | None:
    """``(origin, seq)`` of an event id ``<stream>-<origin>.<seq>``."""
    tail = eid.rpartition("-")[2]
    origin, dot, seq = tail.rpartition(".")
    return (origin, int(seq)) if dot and seq.isdigit() else None


def _after_lost(ids: list[str], last_event_id: str) -> int | None:
    """Where to resume after an event the client saw but the store never got.

    A process killed right after writing an event to its client loses the (queued) write, so
    the client's ``Last-Event-ID`` is missing. Its origin's events are kept in the order it
    made them, so the resumption starts after that origin's last kept event before it;
    ``None`` when there is none (an id this store cannot place: the caller answers 404).
    """
    lost = _split(last_event_id)
    if lost is None:
        return None
    for index in range(len(ids) - 1, -1, -1):
        here = _split(ids[index])
        if here is not None and here[0] == lost[0]:
            return index + 1 if here[1] < lost[1] else None
    return None
