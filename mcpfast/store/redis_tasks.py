"""``RedisTaskStore``: task records in a Redis every server process shares (``pip install redis``).

Keys (under ``prefix``): ``task:<id>`` the encoded record, expiring by itself at the task's
TTL; ``tasks`` a sorted set of every kept id by expiry (the server-wide count); ``live:<owner>``
a sorted set of an owner's unfinished ids (the per-session count). ``create`` checks both limits
and writes in one script, so processes racing for the last slot cannot both win.
"""

from __future__ import annotations

import time
from typing import Any

from mcpfast.store.tasks import TERMINAL, TaskRecord

__all__ = ["RedisTaskStore"]

_CREATE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 2 end
redis.call('SET', KEYS[3], ARGV[4], 'PXAT', ARGV[5])
redis.call('ZADD', KEYS[1], ARGV[6], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[7])
return 0
"""


class RedisTaskStore:
    """Tasks in Redis (``redis://HOST:PORT/DB``): every process of one server sees every task.

    Args:
        url: the Redis URL.
        prefix: the key prefix (several servers may share one Redis with different prefixes).
    """

    shared = True

    def __init__(self, url: str, *, prefix: str = "mcpfast:tasks:") -> None:
        import redis.asyncio  # type: ignore[import-not-found,unused-ignore]  # the redis extra

        self._redis: Any = redis.asyncio.Redis.from_url(url)
        self._prefix = prefix
        self._create = self._redis.register_script(_CREATE)

    def _key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    def _live(self, owner: str) -> str:
        return f"{self._prefix}live:{owner}"

    async def create(self, record: TaskRecord, max_total: int, max_per_owner: int) -> str | None:
        expires = record.expires
        keys = [f"{self._prefix}tasks", self._live(record.owner), self._key(record.id)]
        args: list[bytes | str | int | float] = [
            expires - record.ttl,
            max_total,
            max_per_owner,
            record.encode(),
            int(expires * 1000),
            expires,
            record.id,
        ]
        refused = await self._create(keys=keys, args=args)
        return {0: None, 1: "total", 2: "owner"}[int(refused)]

    async def load(self, task_id: str) -> TaskRecord | None:
        data = await self._redis.get(self._key(task_id))
        return None if data is None else TaskRecord.decode(task_id, data)

    async def save(self, record: TaskRecord) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key(record.id), record.encode(), pxat=int(record.expires * 1000), xx=True)
            if record.status in TERMINAL:
                pipe.zrem(self._live(record.owner), record.id)
            await pipe.execute()

    async def sweep(self, now: float) -> list[str]:
        key = f"{self._prefix}tasks"
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrangebyscore(key, "-inf", now)
            pipe.zremrangebyscore(key, "-inf", now)
            gone, _ = await pipe.execute()
        return [g.decode() for g in gone]

    async def count(self, owner: str | None = None) -> int:
        key = f"{self._prefix}tasks" if owner is None else self._live(owner)
        return int(await self._redis.zcount(key, f"({time.time()}", "+inf"))  # expired ones no longer count

    async def aclose(self) -> None:
        await self._redis.aclose()
