"""``RedisLink`` and ``RedisStore`` against a real Redis: group commits hand every waiter its own
result, merged creates keep the global cap exact, a flushed script cache is invisible, the bus
survives silence and a restart of Redis."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from mcpfast.store.base import SessionRecord, StoreUnavailable
from mcpfast.store.redis import RedisStore

pytestmark = pytest.mark.timeout(60)


def _record(sid: str) -> SessionRecord:
    return SessionRecord(sid, "2025-11-25", {}, {"name": "t", "version": "1"}, None, time.time())


def _cli(redis, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_concurrent_commands_share_round_trips_and_get_their_own_replies(redis) -> None:
    async def main() -> None:
        store = RedisStore(redis.url)
        try:
            await store.link.execute(("SET", "k0", "v0"))
            before = store.ops
            keys = [f"k{i}" for i in range(50)]
            await asyncio.gather(*(store.link.execute(("SET", k, k.upper())) for k in keys))
            replies = await asyncio.gather(*(store.link.execute(("GET", k), ("STRLEN", k)) for k in keys))
            assert replies == [[k.upper().encode(), len(k)] for k in keys]
            assert store.ops - before < 10  # 100 requests, a handful of round trips
            # a failing command fails its own reply only
            bad, good = await asyncio.gather(store.link.execute(("LPUSH", "k1", "x")), store.link.execute(("GET", "k2")))
            assert isinstance(bad[0], Exception) and "WRONGTYPE" in str(bad[0])
            assert good == [b"K2"]
        finally:
            await store.aclose()

    asyncio.run(main())


def test_merged_creates_keep_the_cap_and_deletes_end_each_session(redis) -> None:
    async def main() -> None:
        store = RedisStore(redis.url)
        try:
            kept = await asyncio.gather(*(store.create(_record(f"s{i}"), 7, 60.0) for i in range(20)))
            assert sum(kept) == 7 and kept[:7] == [True] * 7  # queue order: the first seven
            assert _cli(redis, "zcard", "mcpfast:live") == "7"
            gone = await asyncio.gather(*(store.delete(f"s{i}") for i in range(10)))
            assert gone == [True] * 7 + [False] * 3
            assert await store.load("s1") is None
            assert _cli(redis, "zcard", "mcpfast:live") == "0"
            assert await store.create(_record("again"), 7, 60.0)
            loaded = await store.load("again")
            assert loaded is not None and loaded.client_info == {"name": "t", "version": "1"}
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_delete_message_names_every_session_of_its_batch(redis) -> None:
    async def main() -> None:
        a, b = RedisStore(redis.url), RedisStore(redis.url)
        got: list[tuple[str, str, str]] = []
        a.subscribe(got.append, lambda: None)
        try:
            for i in range(5):
                assert await b.create(_record(f"d{i}"), 100, 60.0)
            await asyncio.sleep(0.3)  # a's subscription is in place
            await asyncio.gather(*(b.delete(f"d{i}") for i in range(5)))
            for _ in range(50):
                if sum(len(sid.split()) for kind, sid, _ in got if kind == "del") >= 5:
                    break
                await asyncio.sleep(0.05)
            ended = sorted(s for kind, sid, _ in got if kind == "del" for s in sid.split())
            assert ended == [f"d{i}" for i in range(5)]
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(main())


def test_a_flushed_script_cache_is_invisible(redis) -> None:
    async def main() -> None:
        store = RedisStore(redis.url)
        try:
            assert await store.create(_record("x1"), 10, 60.0)
            assert _cli(redis, "script", "flush") == "OK"
            assert await store.create(_record("x2"), 10, 60.0)  # NOSCRIPT: resent with its body
            assert await store.delete("x1") and await store.delete("x2")
        finally:
            await store.aclose()

    asyncio.run(main())


def test_the_bus_survives_silence_and_a_redis_restart(redis) -> None:
    async def main() -> None:
        a, b = RedisStore(redis.url), RedisStore(redis.url)
        a.bus_ping = 0.2  # several silent periods pass below: each must keep the subscription
        got: list[tuple[str, str, str]] = []
        reconnected: list[bool] = []
        a.subscribe(got.append, lambda: reconnected.append(True))
        try:
            await asyncio.sleep(1.2)
            await b.publish("reply", "s", "after silence")
            for _ in range(40):
                if got:
                    break
                await asyncio.sleep(0.05)
            assert got == [("reply", "s", "after silence")]
            redis.stop()
            with pytest.raises(StoreUnavailable):
                await b.publish("reply", "s", "lost")
            redis.start()
            for _ in range(100):
                if reconnected:
                    break
                await asyncio.sleep(0.05)
            assert reconnected  # the transport is told messages may have been lost
            await b.publish("reply", "s", "back")
            for _ in range(40):
                if len(got) == 2:
                    break
                await asyncio.sleep(0.05)
            assert got[1] == ("reply", "s", "back")
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(main())


def test_send_to_reaches_the_one_holder_and_says_when_it_is_gone(redis) -> None:
    async def main() -> None:
        a, b, c = RedisStore(redis.url), RedisStore(redis.url), RedisStore(redis.url)
        got: dict[str, list[tuple[str, str, str]]] = {"a": [], "c": []}
        a.subscribe(got["a"].append, lambda: None)
        c.subscribe(got["c"].append, lambda: None)
        try:
            # a holds a 2024-11-05 session: the record names a, once a can be sent to
            await a.listening()
            await a.keep_legacy([("s1", "alice")], 30.0)
            assert await b.legacy_holder("s1") == ("alice", a.holder)
            assert await b.legacy_holder("nobody") is None
            assert await b.send_to(a.holder, "legacy", "s1", "x:{}") is True
            for _ in range(40):
                if got["a"]:
                    break
                await asyncio.sleep(0.05)
            assert got["a"] == [("legacy", "s1", "x:{}")]
            assert got["c"] == []  # to a alone, not to every process
            # a's process is gone (its connections with it): nothing is delivered, and b is told
            await a.aclose()
            assert await b.send_to(a.holder, "legacy", "s1", "x:{}") is False
            assert await b.send_to("never-was", "legacy", "s1", "x:{}") is False
        finally:
            await a.aclose()
            await b.aclose()
            await c.aclose()

    asyncio.run(main())
