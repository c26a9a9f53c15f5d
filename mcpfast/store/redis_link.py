"""``RedisLink``: every command one process sends to Redis, group-committed on one connection.

Requests that need Redis queue their commands (``execute``, or a ``Merged`` that folds many
requests' items into one script call); one pump sends whatever is queued as one pipeline on
one redis-py connection and reads the replies in order, handing each caller its own. While a
round trip is in flight the next commands queue behind it, and a woken pump lets the event
loop finish its turn before it takes the batch (the requests that arrived in the same read
join), so under load one round trip carries the work of many requests: the busier the server,
the fewer round trips per request.

The pump uses redis-py's ``Connection`` (its packer and its hiredis reply parser) with no
per-call timeout task: one ``asyncio.timeout`` bounds each round trip. Scripts are loaded
(``SCRIPT LOAD``) on every new connection and called by SHA; a ``NOSCRIPT`` reply (the
script cache was flushed under a live connection) is answered by resending that command as
``EVAL`` in the same pump turn, so callers never see it. A script command must therefore be
the last command of its job (a resent command runs after the job's later ones).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any, Final

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from mcpfast.store.base import StoreUnavailable

_hiredis_pack: Callable[[Any], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is part of the redis extra
    _hiredis_pack = None

__all__ = ["Merged", "RedisLink", "Script"]

logger = logging.getLogger("mcpfast.store")

MAX_BATCH: Final = 512
"""Commands per round trip at most (the rest go in the next one)."""

Command = tuple[Any, ...]
Done = Callable[[list[Any] | StoreUnavailable], None]
"""Called once with a job's replies (a failed command's reply is its ``ResponseError``) or the failure."""
Build = Callable[[list[Any]], list[tuple[Command, int, Callable[[Any], list[Any]]]]]
"""``Merged`` items -> ``(script call, how many items it holds, reply -> one result per item)``."""


class Script:
    """A Lua script, called by SHA (``call``)."""

    __slots__ = ("body", "sha")

    def __init__(self, body: str) -> None:
        self.body = body
        self.sha = hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()

    def call(self, keys: list[str], args: list[Any]) -> Command:
        return ("EVALSHA", self.sha, len(keys), *keys, *args)


class RedisLink:
    """One connection's worth of commands, sent in group commits (see the module doc).

    Attributes:
        round_trips: pipelines sent (each is one round trip, however many commands it holds).
        errors: round trips that failed (the store counted as unavailable).
    """

    def __init__(self, url: str, timeout: float, scripts: list[Script]) -> None:
        self.timeout = timeout
        self.round_trips = 0
        self.errors = 0
        self._pool = aredis.ConnectionPool.from_url(
            url,
            socket_timeout=None,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
            protocol=2,
        )
        self._scripts = {s.sha: s for s in scripts}
        self._conn: Any = None
        self._jobs: list[tuple[list[Command], Done]] = []
        self._merged: list[Merged] = []
        self._wake: asyncio.Future[None] | None = None
        self._pump: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ callers

    def submit(self, commands: list[Command], done: Done) -> None:
        """Queue ``commands`` (sent together, in order); ``done`` gets their replies."""
        self._jobs.append((commands, done))
        self.poke()

    async def execute(self, *commands: Command) -> list[Any]:
        """The replies of ``commands`` (raises ``StoreUnavailable``; a command's error is its reply)."""
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

        def done(result: list[Any] | StoreUnavailable) -> None:
            if not future.done():
                if isinstance(result, StoreUnavailable):
                    future.set_exception(result)
                else:
                    future.set_result(result)

        self.submit(list(commands), done)
        return await future

    def poke(self) -> None:
        """Something is queued: make sure the pump will send it."""
        wake = self._wake
        if wake is not None:
            self._wake = None
            if not wake.done():
                wake.set_result(None)
        elif self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._run())

    def merged(self, build: Build) -> Merged:
        """A ``Merged`` queue on this link (see ``Merged``)."""
        m = Merged(self, build)
        self._merged.append(m)
        return m

    async def aclose(self) -> None:
        pump, self._pump = self._pump, None
        if pump is not None:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.disconnect(nowait=True)
        await self._pool.aclose()

    # ------------------------------------------------------------ the pump

    def _take(self) -> list[tuple[list[Command], Done]]:
        jobs = self._jobs
        for m in self._merged:
            if m.items:
                jobs.extend(m.drain())
        if sum(len(c) for c, _ in jobs) <= MAX_BATCH:
            self._jobs = []
            return jobs
        taken, size = 0, 0
        while taken < len(jobs) and (taken == 0 or size + len(jobs[taken][0]) <= MAX_BATCH):
            size += len(jobs[taken][0])
            taken += 1
        self._jobs = jobs[taken:]
        return jobs[:taken]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._jobs and not any(m.items for m in self._merged):
                wake = self._wake = loop.create_future()
                await wake
            # One loop turn before taking the batch: the requests whose bytes the same poll
            # delivered queue their commands meanwhile and go in this round trip, not the next
            # (no timer: what is not ready by then waits for no one).
            await asyncio.sleep(0)
            batch = self._take()
            if batch:
                await self._round_trip(batch)

    async def _connection(self) -> Any:
        conn = self._conn
        if conn is None or not conn.is_connected:
            conn = self._pool.make_connection()
            await conn.connect()
            if self._scripts:
                await conn.send_packed_command(conn.pack_commands([("SCRIPT", "LOAD", s.body) for s in self._scripts.values()]), False)
                for _ in self._scripts:
                    await conn.read_response()
            self._conn = conn
        return conn

    async def _round_trip(self, batch: list[tuple[list[Command], Done]]) -> None:
        self.round_trips += 1
        answered = 0
        try:
            async with asyncio.timeout(self.timeout):
                conn = await self._connection()
                await conn.send_packed_command(_pack(conn, [c for commands, _ in batch for c in commands]), False)
                replies: list[list[Any]] = []
                resend: list[tuple[int, int]] = []
                for j, (commands, _) in enumerate(batch):
                    got = []
                    for k in range(len(commands)):
                        try:
                            got.append(await conn.read_response())
                        except redis.ResponseError as exc:
                            if isinstance(exc, NoScriptError):
                                resend.append((j, k))
                            got.append(exc)
                    replies.append(got)
                if resend:  # the script cache was flushed: the body this time (which caches it again)
                    again = [self._as_eval(batch[j][0][k]) for j, k in resend]
                    await conn.send_packed_command(_pack(conn, again), False)
                    for j, k in resend:
                        try:
                            replies[j][k] = await conn.read_response()
                        except redis.ResponseError as exc:
                            replies[j][k] = exc
            for (_, done), got in zip(batch, replies, strict=True):
                answered += 1
                _deliver(done, got)
        except (redis.RedisError, OSError, TimeoutError) as exc:
            self.errors += 1
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.disconnect(nowait=True)
            failure = StoreUnavailable(f"session store unavailable: {exc.__class__.__name__}")
            for _, done in batch[answered:]:
                _deliver(done, failure)

    def _as_eval(self, command: Command) -> Command:
        script = self._scripts.get(command[1]) if command[0] == "EVALSHA" else None
        return command if script is None else ("EVAL", script.body, *command[2:])


def _pack(conn: Any, commands: list[Command]) -> list[bytes]:
    """The commands in Redis's protocol: hiredis's packer (C) when present, else redis-py's."""
    if _hiredis_pack is None:
        return conn.pack_commands(commands)  # type: ignore[no-any-return]
    return [b"".join([_hiredis_pack(c) for c in commands])]


def _deliver(done: Done, result: list[Any] | StoreUnavailable) -> None:
    try:
        done(result)
    except Exception:
        logger.exception("a session-store reply could not be delivered")


class Merged:
    """Items from many requests folded into as few script calls as one round trip needs.

    ``add(item)`` returns a future for that item's own result. When the link sends, ``build``
    gets every item queued since the last round trip and returns ``(command, n, split)``: the
    command holds the next ``n`` items; ``split(reply)`` gives one result per item, in order
    (an ``Exception`` result fails that item alone).
    """

    def __init__(self, link: RedisLink, build: Build) -> None:
        self.link = link
        self.build = build
        self.items: list[tuple[Any, asyncio.Future[Any]]] = []

    def add(self, item: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.items.append((item, future))
        self.link.poke()
        return future

    def drain(self) -> list[tuple[list[Command], Done]]:
        items, self.items = self.items, []
        jobs: list[tuple[list[Command], Done]] = []
        at = 0
        for command, n, split in self.build([item for item, _ in items]):
            futures = [f for _, f in items[at : at + n]]
            at += n
            jobs.append(([command], _splitter(futures, split)))
        return jobs


def _splitter(futures: list[asyncio.Future[Any]], split: Callable[[Any], list[Any]]) -> Done:
    def done(result: list[Any] | StoreUnavailable) -> None:
        if isinstance(result, StoreUnavailable):
            outcome: list[Any] = [result] * len(futures)
        elif isinstance(result[0], Exception):
            outcome = [StoreUnavailable(f"session store: {result[0]}")] * len(futures)
        else:
            outcome = split(result[0])
        for future, value in zip(futures, outcome, strict=True):
            if future.done():
                continue
            if isinstance(value, Exception):
                future.set_exception(value)
                future.exception()  # retrieved here: a waiter that went away does not log it
            else:
                future.set_result(value)

    return done
