"""``RedisStore``: sessions shared by every process that names the same Redis database.

Keys (``prefix`` defaults to ``mcpfast:``):

* ``<prefix>s:<id>``: a session's ``SessionRecord`` (JSON); its Redis TTL is the idle expiry.
* ``<prefix>live``: a sorted set of session ids scored by last-seen time (the global cap
  counts it; members idle past the timeout are dropped when a session is created).
* ``<prefix>secret``: the key that seals 2026 ``requestState`` (made once, by the first process).
* channel ``<prefix>bus``: messages between processes (``SessionStore.publish``).

Uses redis-py's asyncio client (hiredis parses replies when installed). Every call is one
round trip: ``create`` is one script (cap check + insert, atomic), ``refresh`` one pipeline
for any number of sessions, ``delete`` one pipeline (delete + publish).
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

__all__ = ["RedisStore"]

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
        self._create: Any = None
        self._set_level: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._callbacks: list[tuple[Callable[[Message], None], Callable[[], None]]] = []
        self._secret: bytes | None = None

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}s:{session_id}"

    @property
    def client(self) -> aredis.Redis:
        client = self._client
        if client is None:
            client = self._client = aredis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0), health_check_interval=0,
            )
            self._create = client.register_script(_CREATE)
            self._set_level = client.register_script(_SET_LEVEL)
        return client

    async def _call(self, what: Callable[[], Any]) -> Any:
        self.ops += 1
        try:
            return await asyncio.wait_for(what(), self.timeout * 2)
        except (redis.RedisError, OSError, TimeoutError) as exc:
            self.errors += 1
            raise StoreUnavailable(f"session store unavailable: {exc.__class__.__name__}") from exc

    async def create(self, record: SessionRecord, max_sessions: int, ttl: float) -> bool:
        client = self.client
        now = time.time()
        done = await self._call(lambda: self._create(
            keys=[self._live, self._key(record.id)],
            args=[now - ttl, max_sessions, now, record.id, record.encode(), max(1, int(ttl * 1000))],
            client=client,
        ))
        return bool(done)

    async def load(self, session_id: str) -> SessionRecord | None:
        data = await self._call(lambda: self.client.get(self._key(session_id)))
        return None if data is None else SessionRecord.decode(session_id, data)

    async def delete(self, session_id: str) -> bool:
        async def run() -> Any:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.delete(self._key(session_id))
                pipe.zrem(self._live, session_id)
                pipe.publish(self._channel, orjson.dumps(("del", session_id, "")))
                return await pipe.execute()

        results = await self._call(run)
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
