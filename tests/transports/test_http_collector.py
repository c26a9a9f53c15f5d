"""The garbage collector of ``mcpfast serve``: the sessions a server holds leave the collector's
walks (frozen after a young collection), young garbage cycles are still freed, a cycle dropped
after it was frozen is freed once the heap has grown, and stopping gives every
frozen object back to the collector."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import weakref
from collections.abc import Iterator

import pytest
from test_http_garbage import CALL, HEADERS, INIT

from mcpfast import Server
from mcpfast.transports.collector import HEAP_FLOOR, YOUNG_PERIOD, Collector
from mcpfast.transports.http import HttpTransport, asgi_app
from mcpfast.transports.http_server import HttpServer, serve

SESSIONS = 50

app = Server("collector")


@app.tool()
def echo(text: str) -> str:
    return text


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> Node:
    """Two objects referring to each other: only a collection frees them once dropped."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a


def walked(*objs: object) -> int:
    """How many of ``objs`` a collection may walk (they are in the collector's generations, not frozen)."""
    tracked = {id(o) for o in gc.get_objects()}
    return sum(id(o) in tracked for o in objs)


@pytest.fixture
def collector() -> Iterator[Collector]:
    """A collector whose frozen objects go back to the collector after the test."""
    made = Collector(count_period=3600.0)
    try:
        yield made
    finally:
        made.stop()
        assert gc.get_freeze_count() == 0


def open_session(t: HttpTransport) -> None:
    status, headers, _ = t.handle("POST", "/mcp", b"", dict(HEADERS), INIT)  # type: ignore[misc]
    assert status == 200
    named = {**HEADERS, b"mcp-session-id": dict(headers)[b"mcp-session-id"], b"mcp-protocol-version": b"2025-11-25"}
    assert t.handle("POST", "/mcp", b"", dict(named), b'{"jsonrpc":"2.0","method":"notifications/initialized"}')[0] == 202  # type: ignore[index]
    assert t.handle("POST", "/mcp", b"", dict(named), CALL)[0] == 200  # type: ignore[index]


def test_the_sessions_a_served_process_holds_leave_the_collectors_walks() -> None:
    """``serve(..., freeze_gc=True)`` (``mcpfast serve``): sessions opened after start-up are
    frozen within a few young periods, so no full collection walks them; stopping unfreezes."""
    t = asgi_app(app)
    seen: dict[str, int] = {}

    async def main() -> None:
        async def check(server: HttpServer) -> None:
            for _ in range(SESSIONS):
                open_session(t)
            sessions = list(t.sessions.values())
            seen["held"] = len(sessions)
            seen["walked_at_once"] = walked(*sessions)
            await asyncio.sleep(YOUNG_PERIOD * 4)
            seen["walked_later"] = walked(*sessions, *(s.conn for s in sessions), *(s.conn.session for s in sessions))

        checks: list[asyncio.Task[None]] = []
        served = asyncio.ensure_future(
            serve(t, "127.0.0.1", 0, ready=lambda s: checks.append(asyncio.ensure_future(check(s))), freeze_gc=True)
        )
        while not checks:
            await asyncio.sleep(0.01)
            assert not served.done(), served.exception()
        await checks[0]
        served.cancel()  # serve's own shutdown path, as on SIGTERM
        with contextlib.suppress(asyncio.CancelledError):
            await served

    asyncio.run(main())
    assert seen["held"] == SESSIONS
    assert seen["walked_at_once"] == SESSIONS  # new objects start in the young generation
    assert seen["walked_later"] == 0
    assert gc.get_freeze_count() == 0


def test_a_young_collection_frees_young_cycles_and_freezes_the_living(collector: Collector) -> None:
    collector.collect_all()
    living = Node()
    dropped = weakref.ref(cycle())
    assert dropped() is not None and walked(living) == 1
    collector.collect_young()
    assert dropped() is None  # collected, not frozen
    assert walked(living) == 0 and gc.is_tracked(living)


def test_a_cycle_dropped_after_it_was_frozen_is_freed_once_the_heap_grew() -> None:
    collector = Collector(growth=1.1, count_period=0.0)
    try:
        collector.collect_all()
        limit = int(max(sys.getallocatedblocks(), HEAP_FLOOR) * 1.1)
        node: Node | None = cycle()
        late = weakref.ref(node)
        collector.collect_young()  # alive: frozen
        node = None
        collector.collect_young()
        assert late() is not None  # no collection walks the frozen objects...
        assert collector.full_collections == 1
        grown: list[list[int]] = [[] for _ in range(limit - sys.getallocatedblocks() + 1_000)]
        collector.collect_young()
        assert late() is None  # ...until the heap has grown 1.1 times: a full collection
        assert collector.full_collections == 2
        assert grown
    finally:
        collector.stop()
    assert gc.get_freeze_count() == 0


def test_stopping_gives_the_frozen_objects_back_to_the_collector(collector: Collector) -> None:
    collector.collect_all()
    kept = cycle()
    collector.collect_young()
    assert walked(kept) == 0
    collector.stop()
    assert walked(kept) == 1
    dropped = weakref.ref(kept)
    del kept
    gc.collect()
    assert dropped() is None
