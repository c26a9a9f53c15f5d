"""``RedisStore``: sessions shared by every process that names the same Redis database.

Keys (``prefix`` defaults to ``mcpfast:``):

* ``<prefix>s:<id>``: a session's ``SessionRecord`` (JSON); its Redis TTL is the idle expiry.
* ``<prefix>live``: a sorted set of session ids scored by last-seen time (the global cap
  counts it; members idle past the timeout are dropped when a session is created).
* ``<prefix>secret``: the key that seals 2026 ``requestState`` (made once, by the first process).
* ``<prefix>procs``: a counter numbering processes (their ranges of request ids to clients).
* ``<prefix>l:<id>``: a 2024-11-05 HTTP+SSE session held by some process
  (``[principal, holder]``), expiring unless that process keeps it while its ``/sse`` stream is
  open.
* channel ``<prefix>bus``: messages between processes (``SessionStore.publish``).
* channel ``<prefix>to:<holder>``: messages to one process (``send_to``): a POST for a
  2024-11-05 session goes to the process holding its stream, and ``PUBLISH`` counting no
  receiver says that process is gone (its connection closed with it).

Every command goes through one ``RedisLink`` (redis-py's connection and hiredis parser,
group-committed: what concurrent requests queue while a round trip is in flight goes out
together in the next). The sessions created meanwhile become one script call (cap check,
records, TTLs: atomic), the sessions ended meanwhile another (records, SSE events, and one
pub/sub message naming them all), so a handshake costs at most two script calls and under
load a fraction of one. ``refresh`` is one round trip for any number of sessions. The
pub/sub listener has its own connection.
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
from mcpfast.store.redis_link import Command, RedisLink, Script

try:
    import redis
    import redis.asyncio as aredis
except ImportError as exc:  # pragma: no cover - the extra is part of `make install`
    raise ImportError("--store redis://… needs redis-py: pip install 'mcpfast[redis]'") from exc

__all__ = ["RedisEvents", "RedisStore"]

logger = logging.getLogger("mcpfast.store")

_CREATE: Final = Script(
    """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local cap = tonumber(ARGV[2])
local records = {}
for record in string.gmatch(ARGV[7], '[^\\n]+') do records[#records + 1] = record end
local out = {}
local i = 0
for id in string.gmatch(ARGV[6], '%S+') do
  i = i + 1
  if n >= cap then
    out[i] = 0
  else
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    redis.call('SET', ARGV[5] .. id, records[i], 'PX', ARGV[4])
    n = n + 1
    out[i] = 1
  end
end
return out
"""
)
"""Sessions made in one round trip: drop members idle past the timeout, then insert each while
the cap allows (KEYS: the live set; ARGV: cutoff, cap, now, TTL ms, the records' key prefix,
the ids space-separated, the records newline-separated: two arguments however many sessions,
joined, not encoded again; a record is compact JSON, which has no raw newline)."""

_DELETE: Final = Script(
    """
local out = {}
local ids = {}
for id in string.gmatch(ARGV[5], '%S+') do ids[#ids + 1] = id end
for i, id in ipairs(ids) do
  out[i] = redis.call('DEL', ARGV[3] .. id)
  local index = ARGV[4] .. id
  local streams = redis.call('SMEMBERS', index)
  for _, key in ipairs(streams) do redis.call('DEL', key) end
  if #streams > 0 then redis.call('DEL', index) end
end
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return out
"""
)
"""Sessions ended in one round trip, with their SSE events, and one message telling every
process (KEYS: the live set; ARGV: channel, message, the records' and the events indexes' key
prefixes, then the ids, space-separated). The keys are named from ARGV, not declared in KEYS:
mcpfast's store is one Redis (or a primary with replicas), never a cluster."""

_UPDATE: Final = Script(
    """
local rec = redis.call('GET', KEYS[1])
if not rec then return 0 end
local d = cjson.decode(rec)
d[ARGV[1]] = cjson.decode(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(d), 'KEEPTTL')
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
"""
)
"""One field of a record changed (log level ``l``, subscriptions ``s``), and every process told
(KEYS: the record; ARGV: field, its JSON value, channel, message)."""

MAX_MERGED: Final = 200
"""Sessions per merged create or delete script call at most (a script blocks Redis while it runs)."""


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
        self._live = f"{prefix}live"
        self._channel = f"{prefix}bus"
        self.holder = secrets.token_hex(8)
        """This process's name for ``send_to`` (its own channel)."""
        self._inbox = f"{prefix}to:{self.holder}"
        self._subscribed = asyncio.Event()
        self.link = RedisLink(url, timeout, [_CREATE, _DELETE, _UPDATE])
        """Every command this process sends (group-committed: ``mcpfast.store.redis_link``)."""
        self._creates = self.link.merged(self._build_creates)
        self._deletes = self.link.merged(self._build_deletes)
        self._listener: asyncio.Task[None] | None = None
        self._callbacks: list[tuple[Callable[[Message], None], Callable[[], None]]] = []
        self._secret: bytes | None = None
        self.bus_ping = 5.0
        """Seconds of silence on the bus connection before a PING checks it is alive."""

    @property
    def ops(self) -> int:
        return self.link.round_trips

    @property
    def errors(self) -> int:
        return self.link.errors

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}s:{session_id}"

    def events_index(self, session_id: str) -> str:
        """The set naming a session's SSE event lists (``RedisEvents``), deleted with it."""
        return f"{self.prefix}evs:{session_id}"

    def _build_creates(self, items: list[tuple[SessionRecord, int, float]]) -> list[tuple[Command, int, Any]]:
        calls: list[tuple[Command, int, Any]] = []
        now = time.time()
        records = self._key("")
        at = 0
        while at < len(items):  # one call per run of equal (cap, TTL): a transport has one of each
            cap, ttl = items[at][1], items[at][2]
            end = at
            while end < len(items) and items[end][1:] == (cap, ttl) and end - at < MAX_MERGED:
                end += 1
            group = [r for r, _, _ in items[at:end]]
            ids = " ".join([r.id for r in group])
            args = [now - ttl, cap, now, max(1, int(ttl * 1000)), records, ids, b"\n".join([r.encode() for r in group])]
            calls.append((_CREATE.call([self._live], args), end - at, _booleans))
            at = end
        return calls

    def _build_deletes(self, ids: list[str]) -> list[tuple[Command, int, Any]]:
        calls: list[tuple[Command, int, Any]] = []
        records, indexes = self._key(""), self.events_index("")
        for at in range(0, len(ids), MAX_MERGED):
            group = ids[at : at + MAX_MERGED]
            joined = " ".join(group)
            message = orjson.dumps(("del", joined, ""))
            calls.append((_DELETE.call([self._live], [self._channel, message, records, indexes, joined]), len(group), _booleans))
        return calls

    def create(self, record: SessionRecord, max_sessions: int, ttl: float) -> asyncio.Future[bool]:
        """A future (not a coroutine): the transport answers ``initialize`` from its callback."""
        return self._creates.add((record, max_sessions, ttl))

    async def load(self, session_id: str) -> SessionRecord | None:
        (data,) = await self.link.execute(("GET", self._key(session_id)))
        _check(data)
        return None if data is None else SessionRecord.decode(session_id, data)

    def delete(self, session_id: str) -> asyncio.Future[bool]:
        """A future, as ``create``."""
        return self._deletes.add(session_id)

    async def set_level(self, session_id: str, level: str) -> None:
        await self._update(session_id, "l", orjson.dumps(level), ("lvl", session_id, level))

    async def set_subscriptions(self, session_id: str, uris: list[str]) -> None:
        value = orjson.dumps(uris)
        await self._update(session_id, "s", value, ("subs", session_id, value.decode()))

    async def _update(self, session_id: str, field: str, value: bytes, message: Message) -> None:
        (done,) = await self.link.execute(_UPDATE.call([self._key(session_id)], [field, value, self._channel, orjson.dumps(message)]))
        _check(done)

    async def refresh(self, session_ids: list[str], ttl: float) -> list[str]:
        if not session_ids:
            return []
        now = time.time()
        ms = max(1, int(ttl * 1000))
        commands: list[Command] = [("PEXPIRE", self._key(sid), ms) for sid in session_ids]
        zadd: list[Any] = ["ZADD", self._live, "XX"]
        for sid in session_ids:
            zadd += (now, sid)
        results = await self.link.execute(*commands, tuple(zadd))
        for r in results:
            _check(r)
        return [sid for sid, alive in zip(session_ids, results, strict=False) if not alive]

    async def publish(self, kind: str, session_id: str, payload: str = "") -> None:
        (sent,) = await self.link.execute(("PUBLISH", self._channel, orjson.dumps((kind, session_id, payload))))
        _check(sent)

    def _legacy_key(self, session_id: str) -> str:
        return f"{self.prefix}l:{session_id}"

    async def keep_legacy(self, sessions: list[tuple[str, str | None]], ttl: float) -> None:
        ms = max(1, int(ttl * 1000))
        commands: list[Command] = [
            ("SET", self._legacy_key(sid), orjson.dumps([principal, self.holder]), "PX", ms) for sid, principal in sessions
        ]
        for r in await self.link.execute(*commands):
            _check(r)

    async def listening(self) -> None:
        """Returns once the bus connection subscribed this process's own channel (``send_to``)."""
        if not self._subscribed.is_set():
            try:
                async with asyncio.timeout(self.timeout * 2):
                    await self._subscribed.wait()
            except TimeoutError:
                raise StoreUnavailable("session store: this process's channel is not subscribed") from None

    async def legacy_holder(self, session_id: str) -> tuple[str | None, str] | None:
        (data,) = await self.link.execute(("GET", self._legacy_key(session_id)))
        _check(data)
        if data is None:
            return None
        principal, holder = orjson.loads(data)
        return principal, holder

    async def send_to(self, holder: str, kind: str, session_id: str, payload: str) -> bool:
        (receivers,) = await self.link.execute(("PUBLISH", f"{self.prefix}to:{holder}", orjson.dumps((kind, session_id, payload))))
        _check(receivers)
        return bool(receivers)

    async def end_legacy(self, session_id: str) -> None:
        (done,) = await self.link.execute(("DEL", self._legacy_key(session_id)))
        _check(done)

    async def process_number(self) -> int:
        """Counted in ``<prefix>procs`` (``INCR``): unique among every process this store served."""
        (number,) = await self.link.execute(("INCR", f"{self.prefix}procs"))
        _check(number)
        return int(number)

    def subscribe(self, callback: Callable[[Message], None], on_reconnect: Callable[[], None]) -> None:
        self._callbacks.append((callback, on_reconnect))
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        """Deliver bus messages; after a lost connection, resubscribe and say so (messages may be lost).

        A redis-py connection of its own, read reply by reply (no ``PubSub`` object: its
        per-message machinery cost more than the rest of a handshake); a PING after ``bus_ping``
        silent seconds notices a dead connection within as many more.
        """
        lost = False
        pool = aredis.ConnectionPool.from_url(self.url, socket_timeout=None, socket_connect_timeout=self.timeout, protocol=2)
        try:
            while True:
                conn = pool.make_connection()
                try:
                    async with asyncio.timeout(self.timeout * 2):
                        await conn.connect()
                        await conn.send_command("SUBSCRIBE", self._channel, self._inbox, check_health=False)
                        await conn.read_response()
                        await conn.read_response()
                    self._subscribed.set()
                    if lost:
                        lost = False
                        for _, on_reconnect in self._callbacks:
                            on_reconnect()
                    pinged = False
                    while True:
                        # a timeout given here returns None and keeps the connection (and so
                        # the subscription): a new connection would not be subscribed
                        reply = await conn.read_response(timeout=self.bus_ping, disconnect_on_error=False)
                        if reply is None:
                            if pinged or not conn.is_connected:
                                raise TimeoutError("the bus connection went silent")
                            pinged = True
                            await conn.send_command("PING", check_health=False)
                            continue
                        pinged = False
                        if type(reply) is list and len(reply) == 3 and reply[0] == b"message":
                            self._deliver(reply[2])
                except asyncio.CancelledError:
                    raise
                except (redis.RedisError, OSError, TimeoutError):
                    lost = True
                    self._subscribed.clear()
                    await asyncio.sleep(0.2)
                finally:
                    await conn.disconnect(nowait=True)
        finally:
            await pool.aclose()

    def _deliver(self, data: bytes) -> None:
        try:
            kind, sid, payload = orjson.loads(data)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return
        for callback, _ in self._callbacks:
            try:
                callback((kind, sid, payload))
            except Exception:
                logger.exception("session-store message %s failed", kind)

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
        await self.link.aclose()


class RedisEvents:
    """``SharedEvents`` in Redis, for resuming on any process.

    Each stream of a session is a list ``<prefix>ev:<session>:<stream>`` of ``<id> <data>``
    entries, at most ``max_events`` long (the oldest dropped), expiring ``ttl`` seconds after
    its last event. An event id is ``<stream>-<origin><seq>``: unique across processes, so a
    stream several processes write (the GET stream) keeps one order, Redis's.

    ``append`` is synchronous (the transport's contract): it names the event at once and
    queues the write; the queue goes out in one pipeline per event-loop turn, and ``landed``
    tells the transport when to send (after the write, so a client never holds an id Redis has
    not got). ``replay`` reads
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
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        """``(seq, future)``: done once the events up to this process's ``seq`` are written."""
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

    def landed(self) -> asyncio.Future[None] | None:
        """``None`` when every event appended so far is written; else a future done when they are
        (or when the write failed: the event then goes out unkept, as the log says, rather than lost)."""
        if not self._flushing:
            return None
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((self._seq, future))
        return future

    def _release(self, upto: int | None) -> None:
        """Wake the waiters whose events are written (``None``: all of them)."""
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for seq, future in self._waiters:
            if upto is None or seq <= upto:
                if not future.done():
                    future.set_result(None)
            else:
                keep.append((seq, future))
        self._waiters = keep

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                upto = self._seq
                ms = max(1, int(self.ttl * 1000))

                commands: list[Command] = []
                for key, session, entry in batch:
                    index = self.store.events_index(session)
                    commands += (
                        ("RPUSH", key, entry),
                        ("LTRIM", key, -self.max_events, -1),
                        ("PEXPIRE", key, ms),
                        ("SADD", index, key),
                        ("PEXPIRE", index, ms),
                    )
                try:
                    for r in await self.store.link.execute(*commands):
                        _check(r)
                except StoreUnavailable as exc:
                    logger.warning("%d SSE events not kept: %s", len(batch), exc)
                self._release(upto)
        finally:
            self._flushing = False
            self._release(None)

    async def prefetch(self, session: str, last_event_id: str) -> None:
        """Fetch what ``replay(session, last_event_id)`` will return (raises ``StoreUnavailable``)."""
        stream, sep, _ = last_event_id.rpartition("-")
        found: tuple[str, list[tuple[str, bytes]]] | None = None
        if sep:
            events = await self.after(session, stream, last_event_id)
            found = None if events is None else (stream, events)
        self._fetched[(session, last_event_id)] = found
        if len(self._fetched) > 1024:
            self._fetched.pop(next(iter(self._fetched)))

    async def after(self, session: str, stream: str, last_event_id: str) -> list[tuple[str, bytes]] | None:
        """The events kept after ``last_event_id`` on ``stream`` (one round trip; ``None``: an id
        this store cannot place). Raises ``StoreUnavailable``."""
        (entries,) = await self.store.link.execute(("LRANGE", self._list(session, stream), 0, -1))
        _check(entries)
        events = [(e[:i].decode(), e[i + 1 :]) for e in entries if (i := e.find(b" ")) > 0]
        ids = [eid for eid, _ in events]
        if last_event_id in ids:
            return events[ids.index(last_event_id) + 1 :]
        at = _after_lost(ids, last_event_id)
        return None if at is None else events[at:]

    def replay(self, session: str, last_event_id: str) -> tuple[str, list[tuple[str, bytes]]] | None:
        return self._fetched.pop((session, last_event_id), None)

    def forget(self, session: str) -> None:
        """Nothing: a process dropping its copy of a session does not end it (``RedisStore.delete`` does)."""


def _booleans(reply: list[int]) -> list[bool]:
    return [bool(r) for r in reply]


def _check(reply: Any) -> None:
    """A command's error reply: the store is not usable as it is (a wrong type, out of memory...)."""
    if isinstance(reply, Exception):
        raise StoreUnavailable(f"session store: {reply}")


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
