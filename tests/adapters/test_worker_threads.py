"""Where an adapted app's plain ``def`` tools run: mcpfast's worker threads, with what the SDK's
anyio hop gives a tool (its own thread, anyio's limit at once, the caller's context, ``anyio.from_thread``)."""

import asyncio
import contextvars
import threading
import time
from typing import Any

import anyio
import anyio.from_thread
import pytest
from _harness import framework_transcript, handshake, mcpfast_transcript, request

from mcpfast.adapters import servable
from mcpfast.adapters._threads import MAX_THREADS, WorkerThreads

pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("_VAR", default="unset")


def test_blocking_calls_run_side_by_side_up_to_the_limit_and_the_loop_stays_free() -> None:
    async def run() -> tuple[float, float, int]:
        pool = WorkerThreads()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        start = time.perf_counter()
        await asyncio.gather(*(pool.run(time.sleep, 0.3) for _ in range(MAX_THREADS)))
        full = time.perf_counter() - start
        start = time.perf_counter()
        await asyncio.gather(*(pool.run(time.sleep, 0.3) for _ in range(MAX_THREADS + 1)))
        over = time.perf_counter() - start
        ticker.cancel()
        pool.stop()
        return full, over, ticks

    full, over, ticks = asyncio.run(run())
    assert 0.3 <= full < 0.6, full  # 40 at once: about one sleep's time, not two
    assert 0.6 <= over < 1.2, over  # the 41st waits for a thread
    assert ticks > 30, ticks  # the event loop ran on while the threads slept


def test_a_call_sees_the_callers_context_and_its_errors_come_back() -> None:
    def read() -> tuple[str, bool]:
        return _VAR.get(), threading.current_thread() is threading.main_thread()

    def stop_iteration() -> None:
        raise StopIteration

    def value_error() -> None:
        raise ValueError("bad")

    async def run() -> None:
        pool = WorkerThreads()
        _VAR.set("caller's")
        assert await pool.run(read) == ("caller's", False)
        with pytest.raises(ValueError, match="bad"):
            await pool.run(value_error)
        with pytest.raises(RuntimeError, match="StopIteration"):  # a future cannot carry one
            await pool.run(stop_iteration)
        pool.stop()
        assert await pool.run(read) == ("caller's", False)  # a stopped pool starts anew
        pool.stop()

    asyncio.run(run())


def test_a_cancelled_caller_stops_waiting_and_the_pool_goes_on() -> None:
    release = threading.Event()

    async def run() -> None:
        pool = WorkerThreads(limit=1)
        slow = asyncio.ensure_future(pool.run(release.wait, 5))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        release.set()  # the call runs to its end in its thread; its result goes nowhere
        assert await asyncio.wait_for(pool.run(lambda: "next"), 2) == "next"
        pool.stop()

    asyncio.run(run())


def test_workers_end_with_the_loop() -> None:
    pool = WorkerThreads()

    async def run() -> None:
        await asyncio.gather(*(pool.run(time.sleep, 0.01) for _ in range(4)))

    asyncio.run(run())  # cancels the tasks that hold the workers: each is told to end
    deadline = time.monotonic() + 5
    while pool.threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.threads == 0


def _sdk_app_with_thread_tools() -> Any:
    from mcp.server.mcpserver import Context, MCPServer

    app = MCPServer("threads")

    @app.tool()
    def log_from_thread(text: str, ctx: Context) -> str:
        # the way a sync tool reaches the async Context, as anyio documents it
        anyio.from_thread.run(ctx.info, f"from a worker thread: {text}")
        return threading.current_thread().name

    return app


def test_a_sync_tool_reaches_the_loop_through_anyio_as_on_the_sdks_own_server() -> None:
    app = _sdk_app_with_thread_tools()
    messages = [*handshake("2025-11-25"), request(1, "tools/call", {"name": "log_from_thread", "arguments": {"text": "hi"}})]
    theirs = anyio.run(framework_transcript, app._lowlevel_server, messages)
    ours = asyncio.run(mcpfast_transcript(servable(app), messages))

    def tail(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [m for m in transcript if m.get("id") != 0]

    assert tail(ours) == tail(theirs)
    log, reply = tail(ours)
    assert log["method"] == "notifications/message" and log["params"]["data"] == "from a worker thread: hi"
    assert reply["result"]["structuredContent"] == {"result": "AnyIO worker thread"}


def test_a_forked_child_starts_its_own_workers_and_a_pool_is_freed() -> None:
    import gc
    import os
    import weakref

    pool = WorkerThreads()

    async def once(threads: WorkerThreads) -> str:
        return await threads.run(lambda: "ran")

    assert asyncio.run(once(pool)) == "ran"
    pid = os.fork()
    if pid == 0:  # the child: the parent's workers are not here; a call starts one of its own
        try:
            ok = asyncio.run(asyncio.wait_for(once(pool), 5)) == "ran"
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ref = weakref.ref(pool)
    pool.stop()
    del pool
    gc.collect()
    assert ref() is None  # the fork hook does not keep it


def test_the_pool_follows_a_changed_anyio_thread_limit() -> None:
    # An app that raised (or lowered) anyio's default limiter in its lifespan gets as many
    # threads from the pool as from anyio's own hop.
    async def run() -> tuple[float, float]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 3
        pool = WorkerThreads()
        start = time.perf_counter()
        await asyncio.gather(*(pool.run(time.sleep, 0.2) for _ in range(3)))
        three = time.perf_counter() - start
        start = time.perf_counter()
        await asyncio.gather(*(pool.run(time.sleep, 0.2) for _ in range(4)))
        four = time.perf_counter() - start
        pool.stop()
        return three, four

    three, four = asyncio.run(run())
    assert 0.2 <= three < 0.4, three  # 3 at once
    assert 0.4 <= four < 0.8, four  # the 4th waits for a thread
